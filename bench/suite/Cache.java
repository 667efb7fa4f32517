// A Java service's cache under G1: 150,000 text values of 0.5-1.5 KiB in a HashMap, then
// 1.5 M operations on Zipf-skewed keys (s = 0.99), four in five reading the value and one in
// five replacing it with a new one (the old becomes garbage the collector evacuates around).
// Prints a checksum of everything read, the same under any collector and any limit.
// Usage: java -XX:+UseG1GC -Xmx320m -cp DIR Cache
import java.util.*;

public class Cache {
    static final int ENTRIES = 150_000;
    static final int OPERATIONS = 1_500_000;
    static final String[] WORDS = ("the of and to in is was for on that with as by at from his "
            + "her which or had are but be not this have were they one all been their has "
            + "more when an there who will would no if out so what up its into than them can "
            + "only other new some could time these two may then do first any my now such "
            + "like our over man me even most made after also did many before must through "
            + "back years where much your way well down should because each just those")
            .split(" ");

    static byte[] value(Random r) {
        StringBuilder s = new StringBuilder();
        int len = 512 + r.nextInt(1024);
        while (s.length() < len) {
            s.append(WORDS[r.nextInt(WORDS.length)]).append(r.nextInt(10) == 0 ? ". " : " ");
            if (r.nextInt(16) == 0) s.append(r.nextInt(1_000_000));
        }
        return s.substring(0, len).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    public static void main(String[] args) {
        Random r = new Random(7);
        HashMap<Integer, byte[]> map = new HashMap<>();
        for (int k = 0; k < ENTRIES; k++) map.put(k, value(r));
        // Zipf's cumulative distribution over ranks; rank i is a key scattered over the map.
        double[] cdf = new double[ENTRIES];
        double total = 0;
        for (int i = 0; i < ENTRIES; i++) cdf[i] = total += 1.0 / StrictMath.pow(i + 1, 0.99);
        int[] keyOfRank = new int[ENTRIES];
        for (int i = 0; i < ENTRIES; i++) keyOfRank[i] = (int) ((i * 2_654_435_761L) % ENTRIES);
        long sum = 0;
        for (int op = 0; op < OPERATIONS; op++) {
            int rank = Arrays.binarySearch(cdf, r.nextDouble() * total);
            int key = keyOfRank[rank < 0 ? Math.min(-rank - 1, ENTRIES - 1) : rank];
            if (r.nextInt(5) == 0) {
                map.put(key, value(r));
            } else {
                byte[] v = map.get(key);
                for (int i = 0; i < v.length; i += 64) sum += v[i];
            }
        }
        for (byte[] v : map.values()) sum += v.length + v[v.length / 2];
        System.out.println("sum " + sum);
    }
}
