"""Restoring reads only the active view: its cost does not grow with evicted history.

On SQLite the restore runs on the store's reader (the standard library's driver); the
same reads on the engine serve the async API, so both are measured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

from contextledger.stores.sql import SQLStore, window
from contextledger.stores.sql.engine import build_engine, parse_url
from tests.sql.helpers import build_ledger, capture, capture_reads, trace_sqlite

ACTIVE = 40
HISTORY = 6_000
_INDEX_USED = "USING INDEX ix_cl_entries_conversation_id_status_seq (conversation_id=? AND status=?)"


def _build(store: SQLStore) -> None:
    build_ledger(store, "big", evicted=HISTORY, active=ACTIVE)
    build_ledger(store, "small", evicted=0, active=ACTIVE)


def _template(sql: str) -> str:
    """A statement with its literals (the reader's trace inlines parameters) replaced by ``?``."""
    return re.sub(r"'(?:[^']|'')*'|\b\d+\b", "?", " ".join(sql.split()))


def test_restore_issues_the_same_statements_whatever_the_history(sql_store: SQLStore) -> None:
    _build(sql_store)
    with capture_reads(sql_store) as big:
        big_snap = sql_store.load("big", "a")
    with capture_reads(sql_store) as small:
        small_snap = sql_store.load("small", "a")
    assert big_snap is not None
    assert small_snap is not None
    assert len(big_snap.entries) == len(small_snap.entries) == ACTIVE
    assert [e.entry_id for e in big_snap.entries] == [f"big-{HISTORY + i}" for i in range(ACTIVE)]
    assert [_template(s.sql) for s in big.work] == [_template(s.sql) for s in small.work]
    assert len(big.work) == 3  # state, active messages, active summaries
    tables = [re.search(r"FROM (\w+)", s.sql) for s in big.work]
    assert [t.group(1) if t else None for t in tables] == ["cl_conversations", "cl_entries", "cl_summaries"]


def test_sqlite_restore_runs_on_the_reader(sqlite_store: SQLStore) -> None:
    # A SQLite file store restores on its reader; the engine sends nothing.
    _build(sqlite_store)
    assert sqlite_store.reader is not None
    with trace_sqlite(sqlite_store) as engine, capture_reads(sqlite_store) as reader:
        assert sqlite_store.load("big", "a") is not None
    assert engine.statements == []
    assert len(reader.work) == 3


@contextmanager
def _vm_steps(engine: Engine) -> Iterator[list[int]]:
    """Count SQLite virtual-machine steps: work done, whatever the clock says.

    The handler stays installed until the block ends, so rows fetched after a
    statement's first step are counted too.
    """
    steps = [0]
    touched: list[Any] = []

    def tick() -> int:
        steps[0] += 1
        return 0

    def install(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        dbapi_connection = conn.connection.dbapi_connection
        dbapi_connection.set_progress_handler(tick, 1)
        touched.append(dbapi_connection)

    event.listen(engine, "before_cursor_execute", install)
    try:
        yield steps
    finally:
        event.remove(engine, "before_cursor_execute", install)
        for dbapi_connection in touched:
            dbapi_connection.set_progress_handler(None, 1)


@contextmanager
def _reader_steps(store: SQLStore) -> Iterator[list[int]]:
    """:func:`_vm_steps` on the store's SQLite reader."""
    assert store.reader is not None
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    store.reader.connection.set_progress_handler(tick, 1)
    try:
        yield steps
    finally:
        store.reader.connection.set_progress_handler(None, 1)


def test_sqlite_restore_work_does_not_grow_with_history(sqlite_store: SQLStore) -> None:
    _build(sqlite_store)
    with _reader_steps(sqlite_store) as big:
        sqlite_store.load("big", "a")
    with _reader_steps(sqlite_store) as small:
        sqlite_store.load("small", "a")
    with _reader_steps(sqlite_store) as everything:
        sqlite_store.history("big", "a")  # a listing runs on the reader too
    # The measure sees history when a query reads it...
    assert everything[0] > 20 * big[0]
    # ...and the restore reads about what a 40-entry conversation reads.
    assert big[0] <= 1.5 * small[0], (big[0], small[0])
    assert sqlite_store.reader is not None
    plan = sqlite_store.reader.connection.execute(
        "EXPLAIN QUERY PLAN " + window.ACTIVE_MESSAGES_SQL, {"conversation_id": 1}
    ).fetchall()
    details = " | ".join(str(row[-1]) for row in plan)
    assert _INDEX_USED in details
    assert "SCAN cl_entries" not in details


def test_sqlite_restore_on_the_engine_does_not_grow_with_history(sqlite_url: str) -> None:
    # A store built on an engine (engine options, an in-memory file) restores through SQLAlchemy: the same reads.
    store = SQLStore(build_engine(parse_url(sqlite_url)), owns_engine=True)
    try:
        store.upgrade()
        assert store.reader is None
        _build(store)
        with _vm_steps(store.engine) as big:
            store.load("big", "a")
        with _vm_steps(store.engine) as small:
            store.load("small", "a")
        assert big[0] <= 1.5 * small[0], (big[0], small[0])
        with capture(store.engine) as captured:
            store.load("big", "a")
        with store.engine.connect() as conn:
            for statement in captured.work:
                if "cl_entries" not in statement.sql:
                    continue
                plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement.sql, statement.parameters).all()
                details = " | ".join(str(row[-1]) for row in plan)
                assert _INDEX_USED in details
                assert "SCAN cl_entries" not in details
    finally:
        store.close()


def _scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child)


def test_postgres_restore_reads_only_active_rows(postgres_store: SQLStore) -> None:
    _build(postgres_store)
    with postgres_store.engine.connect() as conn:
        conn.exec_driver_sql("ANALYZE")
        conn.commit()
    with capture(postgres_store.engine) as captured:
        postgres_store.load("big", "a")
    entry_statements = [s for s in captured.work if "FROM cl_entries" in s.sql]
    assert len(entry_statements) == 1
    statement = entry_statements[0]
    with postgres_store.engine.connect() as conn:
        (raw,) = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, statement.parameters).one()
        conn.rollback()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    nodes = [n for n in _scans(plan) if n.get("Relation Name") == "cl_entries"]
    assert nodes, plan
    for node in nodes:
        assert node["Node Type"] != "Seq Scan", plan
    rows_read = sum(
        n["Actual Rows"] * n["Actual Loops"]
        + n.get("Rows Removed by Filter", 0)
        + n.get("Rows Removed by Index Recheck", 0)
        for n in nodes
    )
    assert rows_read == ACTIVE, plan
    index_names = {n.get("Index Name") for n in _scans(plan)}
    assert "ix_cl_entries_conversation_id_status_seq" in index_names, plan
