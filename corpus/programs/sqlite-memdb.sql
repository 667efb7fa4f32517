-- An in-memory SQLite database: customers, orders and an event log with text, numbers and
-- indexes, built with recursive CTEs, then queried. The CLI stops itself (SIGSTOP via its
-- shell's parent) when done, for `uzswap corpus capture` to read.
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, email TEXT, city TEXT, since TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount REAL, status TEXT, note TEXT);
CREATE TABLE event(id INTEGER PRIMARY KEY, at TEXT, kind TEXT, payload TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
INSERT INTO customer SELECT i,
  'Customer ' || i || ' ' || substr('ABCDEFGHIJKLMNOPQRSTUVWXYZ', 1 + i % 26, 3),
  'c' || i || '@' || (CASE i % 4 WHEN 0 THEN 'example.com' WHEN 1 THEN 'mail.org' WHEN 2 THEN 'corp.net' ELSE 'shop.io' END),
  (CASE i % 7 WHEN 0 THEN 'Berlin' WHEN 1 THEN 'Lisbon' WHEN 2 THEN 'Osaka' WHEN 3 THEN 'Lagos' WHEN 4 THEN 'Lima' WHEN 5 THEN 'Austin' ELSE 'Perth' END),
  date('2015-01-01', '+' || (i % 3000) || ' days') FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000)
INSERT INTO orders SELECT i, 1 + abs(random()) % 100000, round(abs(random()) % 100000 / 100.0, 2),
  (CASE abs(random()) % 3 WHEN 0 THEN 'shipped' WHEN 1 THEN 'pending' ELSE 'delivered' END),
  'order ' || i || ' for ' || hex(randomblob(4)) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO event SELECT i, datetime('2024-01-01', '+' || i || ' seconds'),
  (CASE i % 5 WHEN 0 THEN 'login' WHEN 1 THEN 'view' WHEN 2 THEN 'cart' WHEN 3 THEN 'pay' ELSE 'logout' END),
  json_object('user', i % 100000, 'page', '/p/' || (i % 997), 'ms', i % 1500, 'ok', i % 11 != 0) FROM n;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX customer_city ON customer(city, name);
CREATE INDEX event_kind ON event(kind, at);
CREATE TEMP TABLE city_total AS
  SELECT c.city, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customer c ON c.id = o.customer GROUP BY c.city;
.shell kill -STOP $PPID
