"""Each way Strands' own ``FileSessionManager`` loses data, reproduced -- and not lost by the ledger.

Every test runs one scenario twice, with Strands' ``FileSessionManager`` and with
``LedgerSessionManager`` (SQLite file), and asserts that the file-based session shows
the loss while the ledger does not.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.agent.conversation_manager import (
    ConversationManager,
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.agent.conversation_manager.compression.pin_message import pin_message
from strands.session.file_session_manager import FileSessionManager
from strands.session.session_manager import SessionManager

from contextledger.integrations.strands import LedgerSessionManager
from contextledger.integrations.strands.scripted import CallTool, Overflow, ProviderValidationError, Reply, Step
from contextledger.ledger import Ledger
from tests.strands.child import CRASH_EXIT
from tests.strands.conftest import run_child
from tests.strands.scenarios import build_agent, model_of

Run = Sequence[tuple[str, list[Step]]]


class Backends:
    """Makes the two session managers for one session id, each on its own storage."""

    def __init__(self, tmp_path: Path) -> None:
        self.files = tmp_path / "sessions"
        self.url = f"sqlite:///{tmp_path / 'ledger.db'}"

    def make(self, backend: str, session_id: str) -> SessionManager:
        if backend == "file":
            return FileSessionManager(session_id, storage_dir=str(self.files))
        return LedgerSessionManager(session_id, url=self.url)

    def ledger(self) -> Ledger:
        return Ledger.connect(self.url)


@pytest.fixture
def backends(tmp_path: Path) -> Backends:
    return Backends(tmp_path)


def run_then_restore(
    backends: Backends,
    backend: str,
    manager: Callable[[], ConversationManager],
    run: Run,
    *,
    between: Callable[[Agent], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Play ``run``; return the live messages, the messages a new agent restores, and every id seen."""
    agent = build_agent(backends.make(backend, "s"), manager())
    seen: list[str] = []
    for prompt, steps in run:
        model_of(agent).extend(steps)
        agent(prompt)
        seen += [m["tracking_id"] for m in agent.messages if m["tracking_id"] not in seen]
        if between is not None:
            between(agent)
    live = json.loads(json.dumps(agent.messages))
    del agent
    gc.collect()
    restored = build_agent(backends.make(backend, "s"), manager())
    return live, json.loads(json.dumps(restored.messages)), seen


def _pinned(message: dict[str, Any]) -> bool:
    return bool(message.get("metadata", {}).get("custom", {}).get("pinned"))


CHAT: Run = [(f"question {i}", [Reply(f"answer {i}")]) for i in range(6)]


def test_pin_first_restores_without_the_pinned_head_and_with_an_evicted_message(backends: Backends) -> None:
    def manager() -> ConversationManager:
        return SlidingWindowConversationManager(window_size=4, pin_first=1)

    live, restored, seen = run_then_restore(backends, "file", manager, CHAT)
    assert _pinned(live[0])
    assert live[0]["content"] == [{"text": "question 0"}]
    live_ids = {m["tracking_id"] for m in live}
    assert restored[0]["tracking_id"] != live[0]["tracking_id"], "the pinned head was expected to be lost"
    assert not any(_pinned(m) for m in restored)
    assert any(m["tracking_id"] in set(seen) - live_ids for m in restored), "an evicted message comes back"

    live, restored, _ = run_then_restore(backends, "ledger", manager, CHAT)
    assert _pinned(live[0])
    assert restored == live


def test_a_pin_set_after_the_message_was_appended_is_kept(backends: Backends) -> None:
    def pin_the_first_answer(agent: Agent) -> None:
        if len(agent.messages) == 2:
            pin_message(agent.messages, 1)

    run: Run = CHAT[:3]
    live, restored, _ = run_then_restore(backends, "file", NullConversationManager, run, between=pin_the_first_answer)
    assert _pinned(live[1])
    assert not _pinned(restored[1]), "the file session was expected to drop the pin"

    live, restored, _ = run_then_restore(backends, "ledger", NullConversationManager, run, between=pin_the_first_answer)
    assert _pinned(live[1])
    assert _pinned(restored[1])
    assert restored == live


TRUNCATION: Run = [
    ("Look up alpha.", [CallTool("lookup", {"key": "alpha"}, "tu-alpha"), Reply("alpha found")]),
    ("Compare.", [Overflow(), Reply("compared")]),
]


def _tool_result_text(messages: list[dict[str, Any]]) -> str:
    [text] = [b["toolResult"]["content"][0]["text"] for m in messages for b in m["content"] if "toolResult" in b]
    return str(text)


def test_a_truncated_tool_result_is_restored_truncated(backends: Backends) -> None:
    def manager() -> ConversationManager:
        return SlidingWindowConversationManager(window_size=40)

    live, restored, _ = run_then_restore(backends, "file", manager, TRUNCATION)
    assert "[truncated:" in _tool_result_text(live)
    assert "[truncated:" not in _tool_result_text(restored), "the file session was expected to restore it in full"
    assert len(_tool_result_text(restored)) > len(_tool_result_text(live))

    live, restored, _ = run_then_restore(backends, "ledger", manager, TRUNCATION)
    assert restored == live
    with backends.ledger() as ledger:
        [revision] = ledger.revisions("s")
        assert revision.reason == "truncate_tool_result"
        original = revision.original[0]["toolResult"]["content"][0]["text"]
        assert "[truncated:" not in original
        assert len(original) > len(_tool_result_text(live))
        [reduction] = ledger.reductions("s")
        assert reduction.trigger == "reactive"
        assert reduction.revised == (revision.message_id,)


SUMMARIES: Run = [
    ("Look up alpha.", [CallTool("lookup", {"key": "alpha"}, "tu-alpha"), Reply("alpha found")]),
    ("Look up beta.", [CallTool("lookup", {"key": "beta"}, "tu-beta"), Reply("beta found")]),
    ("Compare.", [Overflow(), Reply("compared")]),
    ("Look up gamma.", [CallTool("lookup", {"key": "gamma"}, "tu-gamma"), Reply("gamma found")]),
    ("Again.", [Overflow(), Reply("again")]),
]


def _summaries_of(backends: Backends, backend: str) -> list[dict[str, Any]]:
    agent = build_agent(
        backends.make(backend, "s"), SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    )
    summaries: list[dict[str, Any]] = []
    for prompt, steps in SUMMARIES:
        model_of(agent).extend(steps)
        agent(prompt)
        summary = agent.conversation_manager.get_state()["summary_message"]
        if summary is not None and all(s["tracking_id"] != summary["tracking_id"] for s in summaries):
            summaries.append(json.loads(json.dumps(summary)))
    assert len(summaries) == 2
    return summaries


def test_each_new_summary_is_kept_not_overwritten(backends: Backends) -> None:
    first, second = _summaries_of(backends, "file")
    stored = "".join(p.read_text() for p in backends.files.rglob("*.json"))
    assert second["tracking_id"] in stored
    assert first["tracking_id"] not in stored, "the file session was expected to overwrite the first summary"
    assert first["content"][0]["text"] not in stored

    first, second = _summaries_of(backends, "ledger")
    with backends.ledger() as ledger:
        rows = ledger.summaries("s")
        assert [r.summary_id for r in rows] == [first["tracking_id"], second["tracking_id"]]
        assert rows[0].content == first["content"][0]["text"]
        assert rows[0].superseded_by == rows[1].summary_id
        assert rows[1].supersedes == rows[0].summary_id
        assert rows[0].summary_id in rows[1].replaces


def test_what_was_evicted_is_recorded(backends: Backends) -> None:
    def manager() -> ConversationManager:
        return SlidingWindowConversationManager(window_size=4)

    live, _, seen = run_then_restore(backends, "file", manager, CHAT)
    evicted = set(seen) - {m["tracking_id"] for m in live}
    assert evicted
    files = list(backends.files.rglob("*.json"))
    stored = "".join(p.read_text() for p in files)
    # The file session keeps a counter; nothing says which message went, when or why.
    for word in ("evict", "per_turn", "end_of_invocation", "reactive", "trigger", "reduction"):
        assert word not in stored
    records = [json.loads(p.read_text()) for p in files if p.name.startswith("message_")]
    by_id = {r["message"]["tracking_id"]: r for r in records}
    assert {tuple(sorted(by_id[i])) for i in evicted} == {tuple(sorted(by_id[i])) for i in by_id if i not in evicted}

    live, _, seen = run_then_restore(backends, "ledger", manager, CHAT)
    evicted = set(seen) - {m["tracking_id"] for m in live}
    with backends.ledger() as ledger:
        evictions = {e.entry_id: e for e in ledger.evictions("s")}
        assert set(evictions) == evicted
        assert {e.trigger for e in evictions.values()} == {"end_of_invocation"}
        assert {e.strategy for e in evictions.values()} == {"strands:SlidingWindowConversationManager"}
        assert all(e.reduction_id and e.evicted_at for e in evictions.values())


def test_a_crash_between_reduction_and_sync_restores_the_live_window(backends: Backends, tmp_path: Path) -> None:
    def crash(backend: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        target = str(backends.files) if backend == "file" else backends.url
        out = tmp_path / f"{backend}.json"
        child = run_child(
            "crash-after-reduction",
            "--backend",
            backend,
            "--target",
            target,
            "--session",
            "c",
            out=out,
            expect_exit=CRASH_EXIT,
        )
        restored = build_agent(
            backends.make(backend, "c"), SlidingWindowConversationManager(window_size=4, per_turn=True)
        )
        return child["live"], json.loads(json.dumps(restored.messages))

    live, restored = crash("file")
    assert len(live) == 3
    assert restored != live, "the file session was expected to restore a stale window"
    assert len(restored) > len(live)

    live, restored = crash("ledger")
    assert restored == live
    with backends.ledger() as ledger:
        assert ledger.reductions("c")[-1].trigger == "per_turn"


def test_a_crash_between_tool_use_and_tool_result_leaves_a_session_that_continues(
    backends: Backends, tmp_path: Path
) -> None:
    def crash(backend: str) -> tuple[Agent, list[dict[str, Any]]]:
        target = str(backends.files) if backend == "file" else backends.url
        out = tmp_path / f"{backend}.json"
        child = run_child(
            "crash-mid-tool",
            "--backend",
            backend,
            "--target",
            target,
            "--session",
            "t",
            out=out,
            expect_exit=CRASH_EXIT,
        )
        agent = build_agent(backends.make(backend, "t"), SlidingWindowConversationManager())
        return agent, child["before_crash"]

    agent, _ = crash("file")
    assert "toolUse" in agent.messages[-1]["content"][0], "the file session restores a dangling toolUse"
    # A direct tool call appends after the dangling toolUse; from then on every model call is refused.
    agent.tool.remember(fact="the sky is blue")
    model_of(agent).extend([Reply("never"), Reply("never")])
    for prompt in ("Go on.", "Try again."):
        with pytest.raises(ProviderValidationError, match="not followed by its toolResult"):
            agent(prompt)

    agent, before = crash("ledger")
    last = agent.messages[-1]
    assert last["role"] == "user"
    [result] = [b["toolResult"] for b in last["content"]]
    assert result["toolUseId"] == "tu-crash"
    assert result["status"] == "error"
    assert agent.messages[: len(before)] == before
    assert agent.messages[-3]["content"] == [{"text": "Look up alpha."}]
    assert agent.messages[-2]["content"][0]["toolUse"]["toolUseId"] == "tu-crash"
    agent.tool.remember(fact="the sky is blue")
    model_of(agent).extend([Reply("went on"), Reply("and on")])
    assert str(agent("Go on.")).strip() == "went on"
    assert str(agent("Try again.")).strip() == "and on"
    with backends.ledger() as ledger:
        [repair] = [r for r in ledger.reductions("t") if r.trigger == "restore"]
        assert repair.strategy == "tool_pair_repair"
        repaired = [h for h in ledger.history("t") if h.message.message_id == last["tracking_id"]]
        assert repaired
        assert repaired[0].status == "active"
