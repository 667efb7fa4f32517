// node: a Map of objects built, then read in a skewed order and folded into a checksum (a
// JavaScript heap under V8's collector). Usage: node map.js [N] (default 600,000 entries).
const n = Number(process.argv[2] || 600000);
const m = new Map();
for (let i = 0; i < n; i++) m.set('key' + i, { i, s: String(i).repeat(4), a: [i, i * 2] });
let h = 0;
let x = 12345;
for (let r = 0; r < 2 * n; r++) {
  x = (x * 1103515245 + 12345) % 2147483648;
  // Skewed: a quarter of the keys take most reads.
  const k = (x % 4 === 0) ? x % n : x % Math.floor(n / 4);
  const v = m.get('key' + k);
  v.a[0] += 1;
  h = (h * 31 + v.s.length + v.a[1]) % 1000000007;
}
console.log(m.size, h);
