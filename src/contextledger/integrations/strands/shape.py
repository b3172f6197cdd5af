"""Whether a Strands agent's messages moved since the ledger last synced them, told by identity.

Strands' conversation managers replace the list, a message or its content list when they
change something, so the same message dicts holding the same content lists, in the same
order, mean nothing was added, removed or replaced: the binding then skips a full
comparison of the agent with the view. An edit made in place inside a content list is
not seen here; the binding compares the contents with the view's for that
(:meth:`~contextledger.integrations.strands.binding.AgentBinding.in_sync`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import is_, methodcaller
from typing import Any

__all__ = ["Shape", "contents"]

_content = methodcaller("get", "content")


def contents(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Each message's content (``None`` where it has none), in order: one map in C."""
    return list(map(_content, messages))


class Shape:
    """The message dicts of an agent and their content lists, as one sync saw them.

    The objects themselves are held, not their ids: CPython reuses the address of an
    object that is gone, so a message dropped and another made in its place could carry
    its id, and a comparison of ids would take the new list for the old one. What is
    held is the window the agent held at its last sync: the agent holds it too, and the
    next sync replaces it (a binding whose agent is gone keeps its last window).
    """

    __slots__ = ("_contents", "_messages")

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Note ``messages`` (the agent's list, copied) and each one's content list."""
        self._messages = list(messages)
        self._contents = contents(self._messages)

    def holds(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Whether ``messages`` are the same dicts, holding the same content lists, in the same order."""
        mine = self._messages
        # Every walk runs in C (maps over operator.is_ and dict.get): asked before every model call.
        if len(messages) != len(mine) or not all(map(is_, messages, mine)):
            return False
        return all(map(is_, map(_content, messages), self._contents))
