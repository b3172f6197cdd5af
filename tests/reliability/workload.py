"""The crash workload, its journal, and the checker run after every kill.

A worker drives one conversation the way an agent loop does -- user prompts, model
calls (some failing with a context overflow, so reactive reductions run), tool-use
turns, pins, per-turn and proactive reductions and summaries -- and writes a journal
line *before* each operation (``begin``) and *after* the store acknowledged it
(``ack``). It is killed with SIGKILL at a random moment. The checker then reads the
ledger with a fresh store and proves, from the journal alone:

* every acknowledged append is present, exactly as written;
* no changeset is partial: a begun but unacknowledged append is all there or not at
  all, and every reduction row agrees with the entries it evicted and its summary;
* no tool pair is split (active or evicted together) and the active view has no orphan
  result (a dangling call is allowed only as the view's newest entry: a crash mid-tool);
* every acknowledged pin holds and pinned entries are never evicted;
* ``model_call_count`` is the last acknowledged value, or one more when a model call was
  in flight.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextledger import (
    Conversation,
    Ledger,
    Message,
    SummarizingConversationManager,
)
from contextledger.errors import ContextLedgerError, ContextWindowOverflowError
from contextledger.stores.capabilities import CompleteStore

__all__ = ["Journal", "check", "run_worker"]

SESSION = "crash"


def _summarize(messages: list[Message]) -> str:
    return "summary of " + ", ".join(m.message_id[:8] for m in messages)


def _manager() -> SummarizingConversationManager:
    return SummarizingConversationManager(summary_ratio=0.4, preserve_recent_messages=4, summarizer=_summarize)


def _open(url: str, options: dict[str, Any]) -> Ledger:
    return Ledger.connect(url, **options)


class _Writer:
    """Append-only journal lines; a line is complete only with its newline (a kill may cut one)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, **record: Any) -> None:
        os.write(self._fd, (json.dumps(record) + "\n").encode())


def run_worker(url: str, options: dict[str, Any], journal: str, seed: int, turns: int = 10_000) -> None:
    """The workload (runs until killed, or ``turns`` turns).

    Each operation is journalled: ``begin`` before, ``ack`` after the store acknowledged.
    """
    rng = random.Random(seed)
    out = _Writer(Path(journal))
    ledger = _open(url, options)
    # A view left mid-tool by the previous kill is repaired (on open, or by the next write).
    conv = ledger.conversation(SESSION, manager=_manager(), context_window_limit=400)
    for turn in range(turns):
        tag = f"{seed}-{turn}"
        prompt = Message.user(f"prompt {tag} " + "x" * rng.randint(0, 120), message_id=f"u-{tag}")
        _append(out, conv, [prompt])
        calls = conv.model_call_count
        if rng.random() < 0.2:
            # A model call that overflows: a reactive reduction, then the retried call.
            out.write(op="model_call", phase="begin", count=calls)
            conv.before_model_call()
            with contextlib.suppress(ContextWindowOverflowError):
                conv.after_model_call(error=ContextWindowOverflowError(f"overflow {tag}"))
            out.write(op="model_call", phase="ack", count=conv.model_call_count)
        calls = conv.model_call_count
        out.write(op="model_call", phase="begin", count=calls)
        conv.before_model_call()
        conv.after_model_call()
        out.write(op="model_call", phase="ack", count=conv.model_call_count)
        if rng.random() < 0.5:
            call = _with_id(Message.tool_use(f"tool-{tag}", "lookup", {"q": tag}, text=f"calling {tag}"), f"c-{tag}")
            result = _with_id(Message.tool_result(f"tool-{tag}", f"result {tag}"), f"r-{tag}")
            if rng.random() < 0.5:
                _append(out, conv, [call, result])
            else:
                _append(out, conv, [call])
                _append(out, conv, [result])
        answer = Message.assistant(f"answer {tag}", message_id=f"a-{tag}")
        _append(out, conv, [answer])
        if rng.random() < 0.15:
            out.write(op="pin", phase="begin", id=prompt.message_id)
            conv.pin(prompt.message_id)
            out.write(op="pin", phase="ack", id=prompt.message_id)
        if rng.random() < 0.2:
            out.write(op="reduce", phase="begin")
            conv.reduce("manual")
            out.write(op="reduce", phase="ack")
        conv.after_invocation()


def _with_id(message: Message, message_id: str) -> Message:
    return Message(message_id=message_id, role=message.role, content=message.content)


def _append(out: _Writer, conv: Conversation, messages: list[Message]) -> None:
    out.write(op="append", phase="begin", messages=[m.to_record() for m in messages])
    conv.append(*messages)
    out.write(op="append", phase="ack", ids=[m.message_id for m in messages])


@dataclass
class Journal:
    """What the journal says was acknowledged, and what was in flight at each kill."""

    acked: dict[str, dict[str, Any]] = field(default_factory=dict)
    in_flight: list[list[dict[str, Any]]] = field(default_factory=list)
    pins: set[str] = field(default_factory=set)
    model_calls: int = 0
    call_in_flight: bool = False
    operations: int = 0

    @classmethod
    def read(cls, path: Path) -> Journal:
        """Parse the journal; a last line cut by the kill is ignored."""
        journal = cls()
        pending: list[dict[str, Any]] | None = None
        for line in _complete_lines(path):
            record = json.loads(line)
            journal.operations += record["phase"] == "ack"
            if record["op"] == "append":
                if record["phase"] == "begin":
                    if pending is not None:  # the previous run was killed during that append
                        journal.in_flight.append(pending)
                    pending = record["messages"]
                else:
                    assert pending is not None
                    for message in pending:
                        journal.acked[message["message_id"]] = message
                    pending = None
            elif record["op"] == "model_call":
                # The worker reads the stored count when it begins a call: that is the truth.
                journal.call_in_flight = record["phase"] == "begin"
                journal.model_calls = record["count"]
            elif record["op"] == "pin" and record["phase"] == "ack":
                journal.pins.add(record["id"])
        if pending is not None:
            journal.in_flight.append(pending)
        return journal


def _complete_lines(path: Path) -> Iterator[str]:
    if not path.exists():
        return
    data = path.read_text()
    lines = data.split("\n")
    yield from (line for line in lines[:-1] if line)


def check(store: CompleteStore, journal: Journal) -> dict[str, int]:
    """Check the ledger against the journal (see the module docstring); returns counts.

    Reads only: ``load``, ``history``, ``reductions`` and ``summaries``, never a write.
    """
    snapshot = store.load(SESSION, "default")
    if snapshot is None:
        assert not journal.acked, "acknowledged appends but no conversation"
        return {"entries": 0}
    history = {h.message.message_id: h for h in store.history(SESSION, "default")}
    # 1. every acknowledged append is there, exactly.
    for message_id, record in journal.acked.items():
        assert message_id in history, f"acknowledged entry {message_id} lost"
        stored = history[message_id].message
        assert stored.content == Message.from_record(record).content, f"entry {message_id} changed"
    # 2a. an append in flight at a kill is all there or not at all.
    for group in journal.in_flight:
        present = [m["message_id"] in history for m in group]
        assert all(present) or not any(present), f"partial append: {present}"
    known = set(journal.acked) | {m["message_id"] for group in journal.in_flight for m in group}
    calls_made = {tid for mid in known if mid in history for tid in history[mid].message.tool_use_ids}
    for message_id in set(history) - known:
        # Only the repair of a call interrupted by a kill writes an entry of its own.
        message = history[message_id].message
        assert message.tool_result_ids, f"entry {message_id} that nobody appended"
        assert set(message.tool_result_ids) <= calls_made, f"repair {message_id} answers no call"
    # 2b. every reduction agrees with what it evicted and its summary.
    reductions = {r.reduction_id: r for r in store.reductions(SESSION, "default")}
    summaries = {s.summary_id: s for s in store.summaries(SESSION, "default")}
    for reduction in reductions.values():
        for entry_id in reduction.evicted:
            if entry_id in history:
                assert history[entry_id].evicted_by == reduction.reduction_id, f"{entry_id} half-evicted"
            else:
                assert summaries[entry_id].evicted_by == reduction.reduction_id, f"summary {entry_id} half-evicted"
        if reduction.summary_id is not None:
            assert reduction.summary_id in summaries, f"reduction {reduction.reduction_id} lost its summary"
    for entry in history.values():
        if entry.status == "evicted":
            assert entry.evicted_by in reductions, f"{entry.message.message_id} evicted by no reduction"
    # 3. tool pairs are never split; the active view has no orphan result.
    calls = {tid: h for h in history.values() for tid in h.message.tool_use_ids}
    results = {tid: h for h in history.values() for tid in h.message.tool_result_ids}
    for tid, result in results.items():
        assert tid in calls, f"result {tid} without its call"
        assert calls[tid].status == result.status, f"tool pair {tid} split: {calls[tid].status}/{result.status}"
    view_ids = [e.entry_id for e in snapshot.entries]
    for position, view_entry in enumerate(snapshot.entries):
        for tid in view_entry.message.tool_use_ids:
            if tid not in results:
                assert position == len(snapshot.entries) - 1, f"dangling call {tid} inside the view"
    # 4. pins hold, pinned entries stay active.
    for message_id in journal.pins:
        entry = history[message_id]
        assert entry.pinned, f"pin of {message_id} lost"
        assert entry.status == "active", f"pinned {message_id} evicted"
        assert message_id in view_ids
    # 5. model_call_count: the last acknowledged value, or one more with a call in flight.
    count = snapshot.state.model_call_count
    allowed = {journal.model_calls, journal.model_calls + 1} if journal.call_in_flight else {journal.model_calls}
    assert count in allowed, f"model_call_count {count}, journal says {sorted(allowed)}"
    return {"entries": len(history), "reductions": len(reductions), "summaries": len(summaries)}


def is_typed(exc: BaseException) -> bool:
    """Whether ``exc`` is one of the library's own errors."""
    return isinstance(exc, ContextLedgerError)
