-- A psql session against numadb serve, as a new user would type it (tests/psql.rs compares the output).
\set VERBOSITY verbose
\pset pager off
SHOW server_version;
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price DOUBLE PRECISION, qty BIGINT, active BOOLEAN);
CREATE INDEX items_name ON items USING hash (name);
INSERT INTO items VALUES (1, 'apple', 0.5, 10, true), (2, 'pear', 0.75, NULL, false);
\dt
\d
\d items
\d+ items
\di
\d items_pkey
\dn
\dt nosuch*
\d nosuch
COPY items FROM STDIN WITH (FORMAT csv);
3,plum,1.25,7,t
4,"fig, dried",2,,f
\.
SELECT * FROM items ORDER BY id;
SELECT count(*), sum(qty), min(price), max(name) FROM items WHERE active OR qty IS NULL;
PREPARE by_id(int) AS SELECT name, price FROM items WHERE id = $1;
EXECUTE by_id(4);
DEALLOCATE by_id;
EXECUTE by_id(4);
SELECT * FROM nosuch;
SELECT nosuch FROM items;
SELECT 2147483647 + 1;
SELEC 1;
INSERT INTO items VALUES (1, 'again', 1, 1, true);
SET numadb.stealing = 'off';
SHOW numadb.stealing;
SET numadb.stealing = 'sometimes';
SET statement_timeout = '5s';
SHOW statement_timeout;
BEGIN;
SELECT 1/0;
SELECT 1;
ROLLBACK;
SELECT table_name, rows FROM numadb.tables ORDER BY 1;
\dv numadb.*
SELECT count(*) > 0 AS has_nodes FROM numadb.nodes;
SELECT current_database(), current_user, current_setting('server_version');
DROP TABLE IF EXISTS nosuch;
CREATE TABLE IF NOT EXISTS items (id INTEGER);
ALTER TABLE items ADD COLUMN IF NOT EXISTS name TEXT;
\q
