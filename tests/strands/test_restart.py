"""A real Strands agent, a scripted model, many turns -- then a restart, compared message by message."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from contextledger.integrations.strands import LedgerSessionManager
from contextledger.ledger import Ledger
from contextledger.stores.capabilities import CompleteStore
from tests.strands.conftest import run_child
from tests.strands.scenarios import MANAGERS, RUNS, EvictionSpy, build_agent, model_of, play, snapshot

KINDS = sorted(RUNS)


def _assert_same_messages(restored: list[dict[str, Any]], before: list[dict[str, Any]]) -> None:
    assert len(restored) == len(before)
    for index, (got, want) in enumerate(zip(restored, before, strict=True)):
        assert got == want, f"message {index} differs after restore"


@pytest.mark.parametrize("kind", KINDS)
def test_restart_in_a_fresh_process_restores_the_live_view(kind: str, sqlite_url: str, tmp_path: Path) -> None:
    session_manager = LedgerSessionManager("trip", url=sqlite_url)
    agent = build_agent(session_manager, MANAGERS[kind]())
    agent.state.set("user", {"name": "Ada", "turns": len(RUNS[kind])})
    play(agent, RUNS[kind])
    conversation = session_manager.conversation()
    before = snapshot(agent, conversation.model_call_count)
    calls_before = len([c for c in model_of(agent).calls if not c.summarization])
    assert before["model_call_count"] == calls_before
    assert any(m.get("metadata", {}).get("custom", {}).get("pinned") for m in before["messages"])
    session_manager.close()

    child = run_child("restore", "--url", sqlite_url, "--session", "trip", "--kind", kind, out=tmp_path / "out.json")

    restored = child["restored"]
    _assert_same_messages(restored["messages"], before["messages"])
    assert restored["state"] == before["state"] == {"user": {"name": "Ada", "turns": len(RUNS[kind])}}
    assert restored["conversation_manager"] == before["conversation_manager"]
    assert restored["model_call_count"] == before["model_call_count"]

    # The restored agent continues: one more model call, counted in step with the run.
    after = child["after"]
    assert after["model_call_count"] == before["model_call_count"] + 1
    assert [m["content"] for m in after["messages"][-2:]] == [[{"text": "One more?"}], [{"text": "one more"}]]
    if kind == "sliding":
        # Strands' per_turn counter went on from the restored value, not from zero.
        assert (
            after["conversation_manager"]["model_call_count"] == before["conversation_manager"]["model_call_count"] + 1
        )


@pytest.mark.parametrize("kind", KINDS)
def test_eviction_history_names_every_evicted_message_its_trigger_and_summary(kind: str, memory_ledger: Ledger) -> None:
    spy = EvictionSpy()
    session_manager = LedgerSessionManager("history", ledger=memory_ledger)
    agent = build_agent(session_manager, MANAGERS[kind](), hooks=[spy])
    play(agent, RUNS[kind])

    evictions = {e.entry_id: e for e in memory_ledger.evictions("history")}
    assert spy.expected, "the run evicted nothing"
    assert set(evictions) == set(spy.expected)
    for entry_id, trigger in spy.expected.items():
        eviction = evictions[entry_id]
        assert eviction.trigger == trigger, f"{eviction.preview!r}: {eviction.trigger} != {trigger}"
        assert eviction.replaced_by_summary == spy.replaced_by[entry_id]
        assert eviction.strategy == f"strands:{type(agent.conversation_manager).__name__}"
        if trigger == "reactive":
            assert eviction.error is not None
            assert "ContextWindowOverflowException" in eviction.error
        else:
            assert eviction.error is None

    # Every message the agent ever had is either in the live view or in the eviction history.
    live = {m["tracking_id"] for m in agent.messages}
    assert set(spy.added) <= live | set(evictions)
    history = memory_ledger.history("history")
    assert {h.message.message_id for h in history if h.status == "evicted"} == {
        e for e, ev in evictions.items() if ev.kind == "message"
    }

    triggers = {r.trigger for r in memory_ledger.reductions("history")}
    if kind == "sliding":
        assert {"per_turn", "proactive", "reactive", "end_of_invocation"} <= triggers
        # both reactive truncations kept the full tool result as a revision
        revisions = memory_ledger.revisions("history")
        assert len(revisions) == 2
        assert all(r.reason == "truncate_tool_result" for r in revisions)
        for revision in revisions:
            original = revision.original[0]["toolResult"]["content"][0]["text"]
            assert original.startswith("entry ")
            assert "[truncated:" not in original
    else:
        assert {"proactive", "reactive"} <= triggers
        summaries = memory_ledger.summaries("history")
        assert len(summaries) == 3
        # each new summary supersedes the previous one instead of overwriting it
        assert [s.supersedes for s in summaries] == [None, summaries[0].summary_id, summaries[1].summary_id]
        assert [s.status for s in summaries] == ["evicted", "evicted", "active"]
        live_summary = agent.conversation_manager.get_state()["summary_message"]
        assert summaries[-1].summary_id == live_summary["tracking_id"]
        for summary in summaries:
            assert set(summary.replaces) == {e for e, s in spy.replaced_by.items() if s == summary.summary_id}


def test_restore_is_exact_on_every_backend(store: CompleteStore) -> None:
    ledger = Ledger(store)
    session_manager = LedgerSessionManager("backend", ledger=ledger)
    agent = build_agent(session_manager, MANAGERS["sliding"]())
    play(agent, RUNS["sliding"])
    before = snapshot(agent, session_manager.conversation().model_call_count)
    del agent
    gc.collect()

    again = LedgerSessionManager("backend", ledger=ledger)
    restored_agent = build_agent(again, MANAGERS["sliding"]())
    restored = snapshot(restored_agent, again.conversation().model_call_count)
    _assert_same_messages(restored["messages"], before["messages"])
    assert restored["conversation_manager"] == before["conversation_manager"]
    assert restored["model_call_count"] == before["model_call_count"]
    # restore read the active view only
    assert len(ledger.history("backend")) > len(restored["messages"])
