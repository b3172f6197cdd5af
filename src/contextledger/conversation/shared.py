"""The views a ledger's conversations last held, shared by the conversations it opens next.

A host makes a history or session object per request (LangChain's
``RunnableWithMessageHistory``, a web app's ``LedgerSession`` per call), and each one opens
its conversation afresh: without this, every request restored the whole active view
from the store, though the request before had just committed or read the same one.

:class:`SharedViews` keeps, per (session, agent), the state and view a conversation of
the ledger last committed or read. Opening (or refreshing) a conversation reads its
stored state first -- one small read -- and takes the shared view when the stored
conversation is the same one at the same version: every change to a view (a commit, an
erasure, through any process) moves the version, and a session deleted and made again
has another ``created_at`` (the rule :meth:`Transaction.refresh
<contextledger.conversation.transaction.Transaction.refresh>` follows for the view a
conversation holds). Views are immutable, so one view object may be held by any number
of conversations. Nothing is ever served from here without that state read.

Bounded by the entries held, oldest used first out; ``0`` turns sharing off.

A host binding may keep a *companion* with a kept view (:meth:`SharedViews.companion`):
its renderer, whose renderings of the view's messages the next object of the same
conversation reuses. A companion lives as long as its conversation's view is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, cast

from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.model.records import ConversationState

__all__ = ["DEFAULT_SHARED_ENTRIES", "Shared", "SharedViews", "checked_bound"]

T = TypeVar("T")

DEFAULT_SHARED_ENTRIES = 20_000
"""Entries the shared views of one ledger hold at most by default (a few tens of MB of a long conversation's text)."""


def checked_bound(max_entries: object) -> int:
    """``max_entries`` as the bound of a :class:`SharedViews` (what ``shared_views=`` takes).

    Raises:
        ConfigurationError: It is not a non-negative int.
    """
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
        raise ConfigurationError(f"shared_views must be a non-negative int, got {max_entries!r}")
    return max_entries


class Shared(NamedTuple):
    """What a conversation last held: its state (its version and ``created_at`` tell it) and its active view."""

    state: ConversationState
    view: View


class SharedViews:
    """A bounded map of (session_id, agent_id) to the last :class:`Shared` one of the ledger's conversations held.

    Thread-safe. A view longer than the bound is not kept; when the entries held pass
    the bound, the views used longest ago are dropped first.
    """

    def __init__(self, max_entries: int = DEFAULT_SHARED_ENTRIES) -> None:
        """Hold at most ``max_entries`` entries in all (``0``: hold nothing).

        Raises:
            ConfigurationError: ``max_entries`` is not a non-negative int.
        """
        self.max_entries = checked_bound(max_entries)
        # In order of use, the latest last: (state, view, len(view)) -- a plain tuple, made on every commit.
        self._held: dict[tuple[str, str], tuple[ConversationState, View, int]] = {}
        self._entries = 0
        self._companions: dict[tuple[str, str], dict[str, Any]] = {}  # only of keys held
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Conversations whose view is held."""
        return len(self._held)

    def held(self) -> list[tuple[str, str]]:
        """The (session_id, agent_id) pairs whose view is held, the least recently used first."""
        with self._lock:
            return list(self._held)

    @property
    def entries(self) -> int:
        """Entries held in all (a view shared by two keys counts twice)."""
        return self._entries

    def get(self, key: tuple[str, str]) -> Shared | None:
        """What a conversation of ``key`` last held, if it is still kept (marked as used)."""
        with self._lock:
            held = self._held.pop(key, None)
            if held is None:
                return None
            self._held[key] = held
        return Shared(held[0], held[1])

    def companion(self, key: tuple[str, str], kind: str, make: Callable[[], T]) -> T:
        """The object of ``kind`` kept with the view of ``key``, made by ``make`` the first time it is asked for.

        Every caller asking for the same ``key`` and ``kind`` while that view is kept gets
        the same object, so it must be safe to share between threads (a host's renderer
        that replaces what it holds instead of changing it). It is dropped with the view
        (the bound, an erasure, a deletion); while no view of ``key`` is kept, a new object
        is made for the caller alone.
        """
        with self._lock:
            if key not in self._held:
                return make()
            kinds = self._companions.setdefault(key, {})
            found = kinds.get(kind)
            if found is None:
                found = kinds[kind] = make()
            return cast(T, found)

    def put(self, key: tuple[str, str], state: ConversationState, view: View) -> None:
        """Keep ``view`` and ``state`` as what a conversation of ``key`` holds now (replacing what was kept).

        Called after every commit of a conversation that shares: a dict replacement under
        the lock, in the common case (the bound not reached).
        """
        size = len(view)
        with self._lock:
            held = self._held
            old = held.pop(key, None)
            if size > self.max_entries:
                if old is not None:
                    self._entries -= old[2]
                    self._companions.pop(key, None)
                return
            held[key] = (state, view, size)
            self._entries += size if old is None else size - old[2]
            while self._entries > self.max_entries:
                oldest = next(iter(held))
                self._entries -= held.pop(oldest)[2]
                self._companions.pop(oldest, None)

    def forget(self, session_id: str | None = None) -> None:
        """Drop what is kept for ``session_id`` (every agent), or everything (``None``), companions included.

        Nothing kept is ever served without the state read that confirms it; a ledger's
        own erasures and deletions still drop it at once, so erased text does not stay
        in memory after them.
        """
        with self._lock:
            if session_id is None:
                self._held.clear()
                self._companions.clear()
                self._entries = 0
                return
            for key in [k for k in self._held if k[0] == session_id]:
                self._entries -= self._held.pop(key)[2]
                self._companions.pop(key, None)
