"""Hot paths: an append is two statements; a reduction touches only the rows it changes."""

from __future__ import annotations

from contextledger import Message, ReductionPlan, SummaryDraft
from contextledger.conversation import Conversation
from contextledger.stores.sql import SQLStore
from tests.sql.helpers import build_ledger, capture


def test_append_is_one_update_and_one_insert(sql_store: SQLStore) -> None:
    conversation = Conversation(sql_store, "s", "a")
    conversation.append(Message.user("first"))
    with capture(sql_store.engine) as captured:
        conversation.append(Message.user("q"), Message.tool_use("t1", "f", {}), Message.tool_result("t1", "r"))
    work = captured.work
    assert len(work) == 2, [s.sql for s in work]
    update, insert = work
    assert update.sql.lstrip().startswith("UPDATE cl_conversations")
    assert "version = " in update.sql
    assert insert.sql.lstrip().startswith("INSERT INTO cl_entries")
    snap = sql_store.load("s", "a")
    assert snap is not None
    assert len(snap.entries) == 4


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
