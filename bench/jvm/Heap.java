// A Java heap under pressure: N arrays of 8,192 longs (64 KiB each) of small values, three
// rounds of random updates each ended by a System.gc() while a thread spins (the collector
// must stop it at a safepoint), then every element summed. Prints the sum, the same under
// any collector and any memory limit. Usage: java -cp DIR Heap N
import java.util.*;
public class Heap {
    public static void main(String[] a) throws Exception {
        int n = Integer.parseInt(a[0]);
        Thread busy = new Thread(() -> { long x = 0; while (true) { x++; } });
        busy.setDaemon(true); busy.start();
        List<long[]> keep = new ArrayList<>();
        Random r = new Random(42);
        for (int i = 0; i < n; i++) { long[] b = new long[8192]; for (int j = 0; j < b.length; j++) b[j] = r.nextLong() & 0xffff; keep.add(b); }
        long sum = 0;
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < n; i++) { long[] b = keep.get(r.nextInt(n)); b[r.nextInt(b.length)]++; sum += b[0]; }
            System.gc();
        }
        for (long[] b : keep) for (long v : b) sum += v;
        System.out.println("sum " + sum);
    }
}
