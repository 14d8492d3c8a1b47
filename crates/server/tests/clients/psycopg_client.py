"""psycopg 3 against numadb serve: server-side prepared statements, binary results, types, errors with their
SQLSTATEs, transactions, COPY, pipeline mode and cancel. Run by tests/psycopg.rs with the server's URL."""

import sys
import threading
import time

import psycopg
from psycopg import errors, sql

url = sys.argv[1]

with psycopg.connect(url) as conn:
    assert conn.info.server_version == 150000, conn.info.server_version
    assert conn.info.parameter_status("server_encoding") == "UTF8"
    with conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, score DOUBLE PRECISION, "
            "visits BIGINT, member BOOLEAN)"
        )
        # Parameters travel in the extended protocol; psycopg sends Python ints as int2/int4/int8 by value.
        cur.execute(
            "INSERT INTO people VALUES (%s, %s, %s, %s, %s)", (1, "ann", 1.5, 10_000_000_000, True)
        )
        cur.executemany(
            "INSERT INTO people VALUES (%s, %s, %s, %s, %s)",
            [(2, "bob", -0.25, 7, False), (3, None, None, None, None), (4, "dee", 3.0, 2, True)],
        )
    conn.commit()

    # Server-side prepared statements: prepare=True prepares at once and reuses the statement.
    with conn.cursor() as cur:
        for key in (1, 2, 3, 4, 40000, 2**31 - 1):
            cur.execute("SELECT name FROM people WHERE id = %s", (key,), prepare=True)
            row = cur.fetchone()
            if key == 1:
                assert row == ("ann",), row
            if key > 4:
                assert row is None, row
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS

    # Up to 65 535 parameters, as PostgreSQL takes (the protocol's count is an unsigned 16-bit number).
    with conn.cursor() as cur:
        many = list(range(40_000))
        cur.execute("SELECT greatest(" + ", ".join(["%s::int"] * len(many)) + ")", many, prepare=True)
        assert cur.fetchone() == (39_999,)
    conn.commit()

    # Binary results, every type.
    with conn.cursor(binary=True) as cur:
        cur.execute("SELECT id, name, score, visits, member FROM people ORDER BY id")
        rows = cur.fetchall()
        assert rows == [
            (1, "ann", 1.5, 10_000_000_000, True),
            (2, "bob", -0.25, 7, False),
            (3, None, None, None, None),
            (4, "dee", 3.0, 2, True),
        ], rows
        assert [d.type_code for d in cur.description] == [23, 25, 701, 20, 16]
    # Text results decode to the same values.
    with conn.cursor() as cur:
        cur.execute("SELECT id, name, score, visits, member FROM people WHERE id = %s", (1,))
        assert cur.fetchone() == (1, "ann", 1.5, 10_000_000_000, True)
        cur.execute("SELECT count(*), sum(visits), avg(score) FROM people")
        count, total, average = cur.fetchone()
        assert (count, total) == (4, 10_000_000_009), (count, total)
        assert abs(average - 4.25 / 3) < 1e-12, average
    conn.commit()

    # Errors carry SQLSTATEs; after an error the transaction must be rolled back.
    with conn.cursor() as cur:
        for statement, error in [
            ("SELECT * FROM nosuch", errors.UndefinedTable),
            ("SELECT nosuch FROM people", errors.UndefinedColumn),
            ("SELEC 1", errors.SyntaxError),
            ("SELECT 2147483647 + 1", errors.NumericValueOutOfRange),
            ("INSERT INTO people VALUES (1, 'again', 0, 0, true)", errors.UniqueViolation),
        ]:
            try:
                cur.execute(statement)
                raise AssertionError(f"{statement} succeeded")
            except error as e:
                assert e.sqlstate == error.sqlstate, (e.sqlstate, error.sqlstate)
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
                try:
                    cur.execute("SELECT 1")
                    raise AssertionError("a statement ran in a failed transaction")
                except errors.InFailedSqlTransaction:
                    pass
                conn.rollback()

    # COPY FROM STDIN.
    with conn.cursor() as cur:
        with cur.copy("COPY people (id, name) FROM STDIN WITH (FORMAT csv)") as copy:
            for i in range(10, 1010):
                copy.write(f"{i},person {i}\n")
        cur.execute("SELECT count(*) FROM people")
        assert cur.fetchone() == (1004,)
        with cur.copy("COPY people (id, name) FROM STDIN") as copy:
            copy.write_row((2000, "tab\tand\nnewline"))
        cur.execute("SELECT name FROM people WHERE id = %s", (2000,))
        assert cur.fetchone() == ("tab\tand\nnewline",)
    conn.commit()

    # Pipeline mode: many statements, one Sync.
    with conn.pipeline():
        with conn.cursor() as cur:
            results = []
            for key in range(10, 110):
                cur.execute("SELECT name FROM people WHERE id = %s", (key,))
                results.append(cur)
    with conn.cursor() as cur:
        cur.execute("SELECT name FROM people WHERE id = %s", (109,))
        assert cur.fetchone() == ("person 109",)
    conn.commit()

    # Settings, including numadb's scheduler settings, and the numadb schema.
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SET numadb.binding = 'always'")
        cur.execute("SHOW numadb.binding")
        assert cur.fetchone() == ("always",)
        cur.execute(sql.SQL("SELECT table_name, rows FROM numadb.tables WHERE table_name = {}").format("people"))
        assert cur.fetchone() == ("people", 1005)

    # Notices (NoticeResponse, SQLSTATE 00000), by the simple and the extended protocol.
    notices = []
    conn.add_notice_handler(lambda d: notices.append((d.severity, d.sqlstate, d.message_primary)))
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS nosuch")
        cur.execute("DROP INDEX IF EXISTS nosuch_idx", prepare=True)
        cur.execute("SELECT 1")
    assert notices == [
        ("NOTICE", "00000", 'table "nosuch" does not exist, skipping'),
        ("NOTICE", "00000", 'index "nosuch_idx" does not exist, skipping'),
    ], notices

# Cancel: a long aggregation over a join is cancelled from another thread.
with psycopg.connect(url, autocommit=True) as conn:
    with conn.cursor() as cur:
        cur.execute("CALL numadb.load_thesis(2000000)")
        # Runs until stopped: every row has half the table as partners (400 UNION ALL scans, used until stop 30,
        # could end before the cancel once scans got faster).
        long_query = 'SELECT count(*) FROM "TBL_0" a JOIN "TBL_0" b ON a."C1" % 2 = b."C2" % 2'
        canceller = threading.Timer(0.3, conn.cancel_safe)
        canceller.start()
        started = time.monotonic()
        try:
            cur.execute(long_query)
            raise AssertionError("the query was not cancelled")
        except errors.QueryCanceled as e:
            assert e.sqlstate == "57014"
        canceller.join()
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)

print("ok")
