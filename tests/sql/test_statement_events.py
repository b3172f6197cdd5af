"""A SQLite ledger's statements reach the engine's statement listeners, as a PostgreSQL ledger's do.

A SQLite store commits hot changesets on the driver's own cursor and reads a file on a
read-only connection of its own; SQLAlchemy's ``before_cursor_execute`` /
``after_cursor_execute`` listeners and ``echo`` see neither. While the engine has any of
them (a statement log, an instrumentation), both go through SQLAlchemy instead, and the
fast paths come back once the listeners are gone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from contextledger import Conversation, Ledger, Message, ReductionPlan
from contextledger.stores.sql import SQLStore
from tests.sql.helpers import capture_reads, trace_sqlite


@contextmanager
def listening(store: SQLStore) -> Iterator[list[str]]:
    """The statements SQLAlchemy executes on the store's engine in the block (a listener of the engine)."""
    seen: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append(" ".join(statement.split()[:3]))

    event.listen(store.engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", before)


def test_a_listener_sees_every_append_eviction_and_read(sqlite_store: SQLStore) -> None:
    conversation = Conversation(sqlite_store, "s")
    conversation.append(Message.user("created"))  # the first commit creates the conversation (never hot)
    assert sqlite_store.reader is not None
    with listening(sqlite_store) as seen, capture_reads(sqlite_store) as reader:
        conversation.append(Message.user("q"), Message.assistant("a"))
        conversation.apply_plan(
            lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:1])), trigger="per_turn"
        )
        restored = sqlite_store.load("s", "default")
        history = sqlite_store.history("s", "default")
    assert restored is not None
    assert [e.message.plain_text for e in restored.entries] == ["q", "a"]
    assert [e.message.plain_text for e in history] == ["created", "q", "a"]
    assert reader.statements == [], "the reader ran while the engine had a listener"
    assert seen.count("INSERT INTO cl_entries") == 1  # the append's rows
    assert any(s.startswith("UPDATE cl_entries SET") for s in seen)  # the eviction
    assert sum(s.startswith("SELECT") for s in seen) >= 2  # the load and the listing


def test_the_fast_paths_come_back_when_the_listener_goes(sqlite_store: SQLStore) -> None:
    conversation = Conversation(sqlite_store, "s")
    conversation.append(Message.user("created"))
    with listening(sqlite_store):
        conversation.append(Message.user("while listened to"))
    with trace_sqlite(sqlite_store) as ran, capture_reads(sqlite_store) as reader:
        conversation.append(Message.user("q"), Message.assistant("a"))
        assert sqlite_store.load("s", "default") is not None
    # The hot commit: its precompiled statements on the held connection (the trace sees them), one
    # multi-row insert; the load on the reader.
    assert [s.sql.split()[0] for s in ran.statements] == ["BEGIN", "UPDATE", "INSERT", "INSERT", "COMMIT"]
    assert len(reader.work) == 3


def test_an_echoing_engine_logs_every_append(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Ledger.connect(f"sqlite:///{tmp_path / 'echo.db'}", echo=True) as ledger:
        conversation = ledger.conversation("s")
        conversation.append(Message.user("created"))
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
            caplog.clear()
            conversation.append(Message.user("logged"))
        logged = [r.getMessage() for r in caplog.records if r.name.startswith("sqlalchemy.engine")]
    assert any(m.lstrip().startswith("INSERT INTO cl_entries") for m in logged), logged
