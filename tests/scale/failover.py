"""A failover workload: writers that carry on through a primary's death, and the checker after it.

Each writer thread drives one conversation -- user prompts and answers, model calls, and
manual reductions by a summarizing manager -- through one shared :class:`~contextledger.Ledger`.
A store error is caught and the operation tried again (an append of the same message is
idempotent; a changeset whose outcome stayed unknown is settled by the next write), so a
writer rides out the failover with the same ledger. The writer records every append the
ledger acknowledged; the checker then reads the conversation (only reads) and counts the
acknowledged appends that are missing, and proves that nothing is partial or doubled.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from contextledger import Ledger, Message, SummarizingConversationManager
from contextledger.errors import CommitOutcomeUnknown, ContextLedgerError, StoreUnavailable
from contextledger.stores.capabilities import CompleteStore

__all__ = ["Writer", "check_conversation"]


def _summarize(messages: list[Message]) -> str:
    return "summary of " + ", ".join(m.message_id[:10] for m in messages)


@dataclass
class Writer:
    """One conversation's writer thread (see the module docstring).

    Attributes:
        acked: Ids of the appends the ledger acknowledged, with the time of each.
        errors: Typed errors met, by class name.
        untyped: Errors that were not the library's own (must stay empty).
    """

    ledger: Ledger
    session_id: str
    deadline: float
    acked: dict[str, float] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    untyped: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start writing in a thread."""
        self._thread = threading.Thread(target=self._run, name=f"writer-{self.session_id}", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Ask the writer to stop and wait for it (bounded by its deadline)."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, self.deadline - time.monotonic() + 30))
            assert not self._thread.is_alive(), f"writer {self.session_id} did not stop"

    def acked_since(self, moment: float) -> int:
        """Appends acknowledged after ``moment`` (``time.monotonic()``)."""
        return sum(1 for at in list(self.acked.values()) if at > moment)

    def _retry(self, operation: Callable[[], object]) -> bool:
        """Run ``operation`` until it is acknowledged; ``False`` when stopped or out of time first."""
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            try:
                operation()
                return True
            except (CommitOutcomeUnknown, StoreUnavailable) as exc:
                self.errors[type(exc).__name__] += 1
            except ContextLedgerError as exc:  # a conflict after a lost write: the next try re-reads
                self.errors[type(exc).__name__] += 1
            except Exception as exc:  # recorded, and the test fails on it
                self.untyped.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.05)
        return False

    def _run(self) -> None:
        manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=4, summarizer=_summarize)
        conversation = self.ledger.conversation(self.session_id, manager=manager)
        turn = 0
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            turn += 1
            for message in (
                Message.user(f"prompt {turn}", message_id=f"{self.session_id}-u{turn}"),
                Message.assistant(f"answer {turn}", message_id=f"{self.session_id}-a{turn}"),
            ):
                if not self._retry(partial(conversation.append, message)):
                    return
                self.acked[message.message_id] = time.monotonic()
            if not self._retry(lambda: (conversation.before_model_call(), conversation.after_model_call())):
                return
            if turn % 5 == 0 and not self._retry(lambda: conversation.reduce("manual")):
                return


def check_conversation(store: CompleteStore, session_id: str, acked: set[str]) -> set[str]:
    """Check one conversation after the failover; return the acknowledged appends that are missing.

    Proves, reading only: no entry is stored twice; every entry was appended by the writer;
    every reduction agrees with the entries it evicted and its summary (no changeset is
    partial); the conversation restores.
    """
    assert store.load(session_id, "default") is not None, f"{session_id} does not restore"
    entries = store.history(session_id, "default")
    ids = [h.message.message_id for h in entries]
    assert len(ids) == len(set(ids)), f"{session_id}: an entry is stored twice"
    assert all(i.startswith(f"{session_id}-") for i in ids), f"{session_id}: an entry nobody appended"
    history = {h.message.message_id: h for h in entries}
    reductions = {r.reduction_id: r for r in store.reductions(session_id, "default")}
    summaries = {s.summary_id: s for s in store.summaries(session_id, "default")}
    for reduction in reductions.values():
        for entry_id in reduction.evicted:
            evicted = history.get(entry_id) or summaries.get(entry_id)
            assert evicted is not None, f"reduction {reduction.reduction_id} evicted an entry that is not stored"
            assert evicted.evicted_by == reduction.reduction_id, f"{entry_id} half-evicted"
        if reduction.summary_id is not None:
            assert reduction.summary_id in summaries, f"reduction {reduction.reduction_id} lost its summary"
    for entry in entries:
        if entry.status == "evicted":
            assert entry.evicted_by in reductions, f"{entry.message.message_id} evicted by no reduction"
    return acked - set(history)
