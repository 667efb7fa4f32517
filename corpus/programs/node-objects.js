// A node (V8) process holding typical program data: a Map of user objects, their JSON
// strings, a cache keyed by sha1 hex, arrays of numbers, typed arrays, class instances. It
// stops itself (SIGSTOP) when everything is built, for `uzswap corpus capture` to read.
const crypto = require('crypto');

let seed = 1;
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const pick = (a) => a[Math.floor(rand() * a.length)];
const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel',
  'india', 'juliet', 'kilo', 'lima', 'mike', 'november', 'oscar', 'papa', 'quebec', 'romeo'];

class Order {
  constructor(id, user, items) { this.id = id; this.user = user; this.items = items;
    this.total = items.reduce((s, i) => s + i.price * i.qty, 0); this.created = new Date(1.7e12 + id * 1000); }
}

const users = new Map();
for (let i = 0; i < 100000; i++) {
  users.set(`user-${i}`, { id: i, name: `${pick(words)} ${pick(words)}`,
    email: `${pick(words)}.${i}@example.com`, age: 18 + Math.floor(rand() * 60),
    score: rand() * 1000, active: rand() < 0.7, tags: [pick(words), pick(words)] });
}
const json = [];
for (const u of users.values()) if (u.id % 3 === 0) json.push(JSON.stringify(u));
const cache = {};
for (let i = 0; i < 50000; i++) {
  const k = crypto.createHash('sha1').update(String(i)).digest('hex');
  cache[k] = { hits: i % 17, last: `2024-05-${1 + (i % 28)}T12:00:00Z`, path: `/api/v1/items/${i}` };
}
const orders = [];
for (let i = 0; i < 60000; i++) {
  const items = [];
  for (let j = 0; j < 1 + (i % 4); j++) items.push({ sku: `SKU-${Math.floor(rand() * 9999)}`, qty: 1 + j, price: Math.round(rand() * 10000) / 100 });
  orders.push(new Order(i, `user-${i % 100000}`, items));
}
const samples = new Float64Array(400000).map((_, i) => Math.sin(i / 100) * 50 + rand());
const counts = new Int32Array(200000).map((_, i) => i % 1000);
const html = orders.slice(0, 5000).map((o) => `<tr><td>${o.id}</td><td>${o.user}</td><td>${o.total.toFixed(2)}</td></tr>`).join('\n');

process.kill(process.pid, 'SIGSTOP');
