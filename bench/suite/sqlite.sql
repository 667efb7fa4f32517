-- sqlite3: an in-memory database of rows with text, an index built over it, then aggregate
-- and point queries (a database's page cache and sort buffers on the heap).
PRAGMA cache_size = -1000000;
CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000000)
INSERT INTO t SELECT i, (i * 7919) % 100003, printf('%08d-%x-row payload text', i, (i * 2654435761) % 4294967296) FROM n;
CREATE INDEX t_k ON t (k);
SELECT count(*), sum(k), max(length(v)) FROM t;
SELECT k, count(*) FROM t GROUP BY k ORDER BY count(*) DESC, k LIMIT 3;
SELECT sum(id) FROM t WHERE k BETWEEN 500 AND 900;
SELECT v FROM t ORDER BY v DESC LIMIT 1;
