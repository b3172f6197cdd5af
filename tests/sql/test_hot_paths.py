"""Hot paths: an append is one round trip on PostgreSQL; a reduction touches only the rows it changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextledger import Message, ReductionPlan, SummaryDraft
from contextledger.conversation.conversation import Conversation
from contextledger.stores.sql import SQLStore
from tests.sql.helpers import build_ledger, capture, trace_sqlite, wire

# psycopg prepares a statement on the server the fifth time a connection runs it (one
# extra round trip, once per connection and statement); round trips are counted after.
WARM_UP = 6


def _turn(n: int) -> tuple[Message, ...]:
    return Message.user(f"q{n}"), Message.tool_use(f"t{n}", "f", {"n": n}), Message.tool_result(f"t{n}", "r")


def test_sqlite_append_is_one_update_and_two_inserts(sqlite_store: SQLStore) -> None:
    conversation = Conversation(sqlite_store, "s", "a")
    conversation.append(Message.user("first"))
    with trace_sqlite(sqlite_store) as captured:
        conversation.append(*_turn(0))
    kinds = [" ".join(s.sql.split()[:3]) for s in captured.statements]
    # in a transaction that takes the write lock, committed once
    assert kinds[0] == "BEGIN IMMEDIATE", kinds
    assert kinds[-1] == "COMMIT", kinds
    work = captured.work
    assert len(work) == 3, [s.sql for s in work]
    update, log, rows = work
    assert update.sql.lstrip().startswith("UPDATE cl_conversations")
    assert "version = " in update.sql
    assert log.sql.lstrip().startswith("INSERT INTO cl_changesets")  # the commit log: exactly once
    # the turn's three entries in one multi-row INSERT (SQLite traces each row of an executemany)
    assert rows.sql.lstrip().startswith("INSERT INTO cl_entries")
    assert rows.sql.count("'active'") == 3
    snap = sqlite_store.load("s", "a")
    assert snap is not None
    assert len(snap.entries) == 4


def test_postgres_append_is_one_statement_in_autocommit(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    with capture(postgres_store.engine) as captured:
        conversation.append(*_turn(0))
    assert len(captured.statements) == 1, [s.sql for s in captured.statements]
    (statement,) = captured.statements
    sql = " ".join(statement.sql.split())
    assert sql.startswith("WITH bumped AS (UPDATE cl_conversations SET version=")
    assert "INSERT INTO cl_entries" in sql
    assert not statement.executemany
    # What every row shares is in the text or bound once: the turn, the conversation's
    # identity and version, the commit's id, time and call -- nothing else is dumped per append.
    assert set(statement.parameters) == {
        "p_now",
        "p_session_id",
        "p_agent_id",
        "p_expected",
        "p_next_seq",
        "p_new_version",
        "p_changeset_id",
        "e_rows",
        "s_from_call",
    }
    assert "'active'" in statement.sql
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert [e.entry_id for e in snap.entries] == [e.entry_id for e in conversation.view.entries]
    assert len(snap.entries) == 4


def test_postgres_append_is_one_round_trip(postgres_store: SQLStore, tmp_path: Path) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    for n in range(WARM_UP):
        conversation.append(*_turn(n))
        conversation.before_model_call()  # a state-only changeset: model_call_count
    for n in range(WARM_UP, WARM_UP + 3):
        with wire(postgres_store, tmp_path / "append.trace") as turn:
            conversation.append(*_turn(n))
        assert turn.round_trips == 1, turn.sent
        assert turn.queries == []  # no BEGIN, no COMMIT
        assert turn.sent == ["Bind", "Describe", "Execute", "Sync"]  # the prepared statement, once
        assert turn.autocommit == []  # on the held connection: no pool checkout
        with wire(postgres_store, tmp_path / "state.trace") as state:
            conversation.before_model_call()
        assert state.round_trips == 1, state.sent
        assert state.queries == []
        assert state.autocommit == []
        # With the held connection busy (another thread's append), a pooled one sends the same.
        with (
            wire(postgres_store, tmp_path / "pooled.trace") as pooled,
            postgres_store._held_appender().driver_connection(),
        ):
            conversation.append(*_turn(100 + n))
        assert pooled.round_trips == 1, pooled.sent
        assert pooled.queries == []
        assert pooled.sent[-4:] == ["Bind", "Describe", "Execute", "Sync"]
        assert pooled.autocommit == [False]  # the pooled connection went back as it came
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert len(snap.entries) == 1 + 3 * (WARM_UP + 3) + 3 * 3
    assert snap.state.model_call_count == WARM_UP + 3
    assert snap.state.version == conversation.version == 1 + 2 * (WARM_UP + 3) + 3


@pytest.mark.parametrize("threshold", [None, 0, 2], ids=["never", "at-once", "third-use"])
def test_the_held_connection_prepares_as_its_prepare_threshold_says(
    postgres_ledger_url: str, tmp_path: Path, threshold: int | None
) -> None:
    store = SQLStore.from_url(postgres_ledger_url, connect_args={"prepare_threshold": threshold})
    try:
        conversation = Conversation(store, "s", "a")
        conversation.append(Message.user("first"))
        sent: list[list[str]] = []
        for n in range(4):
            with wire(store, tmp_path / f"{n}.trace") as turn:
                conversation.append(*_turn(n))
            assert turn.autocommit == []  # on the held connection
            sent.append(turn.sent)
        text = ["Parse", "Bind", "Describe", "Execute", "Sync"]  # the statement's text, unnamed
        prepare = ["Parse", "Sync"]  # the statement prepared under a name: one more round trip, once
        prepared = ["Bind", "Describe", "Execute", "Sync"]
        if threshold is None:
            assert sent == [text] * 4
        elif threshold == 0:
            assert sent == [prepare + prepared] + [prepared] * 3
        else:
            assert sent == [text, text, prepare + prepared, prepared]
        snap = store.load("s", "a")
        assert snap is not None
        assert len(snap.entries) == 1 + 4 * 3
    finally:
        store.close()


def test_postgres_transactions_still_send_begin_and_commit(postgres_store: SQLStore, tmp_path: Path) -> None:
    # The counter-check of the test above: the trace does see a transaction's control.
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(*_turn(0))
    with wire(postgres_store, tmp_path / "reduce.trace") as reduce:
        conversation.apply_plan(
            lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="manual", as_given=True
        )
    assert reduce.queries[0].startswith("BEGIN")
    assert reduce.queries[-1] == "COMMIT"
    assert reduce.round_trips >= 4
    assert reduce.autocommit == [False]


def test_reduction_updates_only_the_rows_it_changes(sql_store: SQLStore) -> None:
    build_ledger(sql_store, "s", evicted=0, active=1_000)
    conversation = Conversation(sql_store, "s", "a")
    with capture(sql_store.engine) as captured:
        conversation.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing",
                evict=(v.ids[10],),
                summary=SummaryDraft(content="S", summarizer="t", replaces=tuple(v.ids[:2])),
            ),
            trigger="proactive",
        )
    work = captured.work
    assert not any(s.sql.lstrip().upper().startswith("DELETE") for s in work)
    entry_updates = [s for s in work if s.sql.lstrip().startswith("UPDATE cl_entries")]
    assert sum(s.rowcount for s in entry_updates) == 3
    assert all(s.rowcount <= 3 for s in work if s.sql.lstrip().upper().startswith("UPDATE"))
    history = sql_store.history("s", "a")
    assert len(history) == 1_000
    assert sum(h.status == "evicted" for h in history) == 3
