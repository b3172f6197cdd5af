"""A store that records what it is asked to commit, one that counts its view reads, and a conversation wired by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.conversation.modelcalls import ModelCalls
from contextledger.conversation.reading import Reader
from contextledger.conversation.reducer import Reducer
from contextledger.conversation.transaction import Transaction
from contextledger.core.changeset import Changeset
from contextledger.core.hooks import HookRegistry
from contextledger.errors import ConcurrencyConflict, ContextWindowOverflowError
from contextledger.managers.base import ConversationManager
from contextledger.model.tokens import CharTokenCounter
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore


class RecordingStore(MemoryStore):
    """A memory store that keeps every changeset it applied, and loses the version race on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.committed: list[Changeset] = []
        self.attempts = 0
        self.conflicts = 0  # the next ``conflicts`` commits raise ConcurrencyConflict

    def commit(self, changeset: Changeset) -> int:
        self.attempts += 1
        if self.conflicts:
            self.conflicts -= 1
            raise ConcurrencyConflict("lost the race (scripted)")
        version = super().commit(changeset)
        self.committed.append(changeset)
        return version


@dataclass
class Parts:
    """One conversation's collaborators, composed the way :class:`~contextledger.Conversation` composes them."""

    transaction: Transaction
    reader: Reader
    reducer: Reducer
    calls: ModelCalls
    hooks: HookRegistry


def compose(
    store: MemoryStore,
    session_id: str = "s",
    *,
    manager: ConversationManager | None = None,
    max_retries: int = 3,
    repair: bool = True,
) -> Parts:
    """Wire the collaborators over ``store`` and read the conversation once."""
    transaction = Transaction(
        store,
        session_id,
        "default",
        manager=manager,
        token_counter=CharTokenCounter(),
        max_retries=max_retries,
        repair=repair,
    )
    reader = Reader(transaction, context_window_limit=None, overflow_errors=(ContextWindowOverflowError,))
    hooks = HookRegistry()
    reducer = Reducer(transaction, reader, hooks, manager)
    transaction.refresh()
    if manager is not None:
        hooks.add_hook(manager)
    return Parts(transaction, reader, reducer, ModelCalls(transaction, reader, reducer), hooks)


class CountingLoads:
    """Counts the view reads (``load``) of a real store, which it serves unchanged."""

    def __init__(self, store: CompleteStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        load = store.load

        def counted(session_id: str, agent_id: str) -> Any:
            self.count += 1
            return load(session_id, agent_id)

        monkeypatch.setattr(store, "load", counted)


def two_turns(conversation: Conversation, first: str, second: str) -> None:
    """Append ``first`` (the user's) and ``second`` (the assistant's), one commit each."""
    conversation.append(Message.user(first))
    conversation.append(Message.assistant(second))


def made_again_to(ledger: Ledger, version: int) -> None:
    """Delete session ``s`` through ``ledger`` and write its agent ``a`` again, up to the same ``version``.

    Only the conversation's creation tells the new one from the old: what a view kept
    for the old one must not be served for it.
    """
    assert ledger.delete_session("s")
    again = ledger.conversation("s", "a")
    two_turns(again, "new one", "new two")
    assert again.state.version == version
