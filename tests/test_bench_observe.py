"""What the detail benchmarks report a SQLite call sent: every statement SQLite ran, the hot path's included.

The store sends a hot changeset on the driver's own cursor, which SQLAlchemy's cursor
events never see; ``benchmarks/_servers.observe`` traces SQLite itself, so the tables of
``benchmarks/DETAILS.md`` cannot read "0 statements" for an append again.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from _servers import Backend, observe  # noqa: E402
from contextledger import Conversation, Message, ReductionPlan  # noqa: E402
from contextledger.stores.sql import SQLStore  # noqa: E402


def test_an_append_and_a_reduction_are_counted_as_sqlite_ran_them(tmp_path: Path) -> None:
    store = SQLStore.from_url(f"sqlite:///{tmp_path / 'observed.db'}")
    try:
        conversation = Conversation(store, "s")
        conversation.append(Message.user("first"), Message.assistant("first answer"))
        backend = Backend("sqlite", "SQLite", store)
        with observe(backend) as appended:
            conversation.append(Message.user("second"), Message.assistant("second answer"), Message.user("third"))
        assert appended.commands == ["BEGIN", "UPDATE", "INSERT", "INSERT", "COMMIT"]
        assert (appended.statements, appended.control, appended.rows) == (3, 2, 3)

        with observe(backend) as reduced:
            conversation.apply_plan(
                lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:2])), trigger="per_turn"
            )
        assert reduced.commands[0] == "BEGIN"
        assert reduced.commands[-1] == "COMMIT"
        assert reduced.rows == 2, reduced.commands  # the two evicted rows of the history table
        assert "SELECT" in reduced.commands  # the check that the ids to evict are active
        assert len(conversation.view) == 3
    finally:
        store.close()


def test_statements_on_pooled_connections_are_counted_too(tmp_path: Path) -> None:
    store = SQLStore.from_url(f"sqlite:///{tmp_path / 'pooled.db'}")
    try:
        conversation = Conversation(store, "s")
        conversation.append(Message.user("first"))
        backend = Backend("sqlite", "SQLite", store)
        # A pin is not a hot changeset: the general path commits it on a pooled connection.
        with observe(backend) as pinned:
            conversation.pin(conversation.view.ids[0])
        assert pinned.commands[0] == "BEGIN"
        assert pinned.commands[-1] == "COMMIT"
        assert pinned.statements >= 2
        assert pinned.rows == 1  # the pinned row
    finally:
        store.close()
