"""The unit of a key rotation: one sealed token replaced by another where it is still stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Swap", "SwapPlace", "swap_in"]

SwapPlace = Literal["content", "meta", "summary", "revision", "manager_state", "agent_state"]


@dataclass(frozen=True)
class Swap:
    """One sealed token to replace by another where it is still stored (a key rotation's unit).

    Attributes:
        where: Which value: a message's ``content`` or ``meta`` (``ident``: its id), a
            ``summary`` (its id), a ``revision``'s original (its message id and
            ``number``), or the conversation's ``manager_state`` / ``agent_state``.
        ident: The message or summary id (empty for state).
        number: The revision number (0 otherwise).
        old: The token stored now.
        new: The token to store instead.
    """

    where: SwapPlace
    ident: str
    old: str
    new: str
    number: int = 0


def swap_in(value: Any, old: str, new: str) -> tuple[Any, bool]:
    """``value`` (decoded JSON) with every string equal to ``old`` replaced by ``new``, and whether one was."""
    if isinstance(value, str):
        return (new, True) if value == old else (value, False)
    if isinstance(value, dict):
        found = False
        out: dict[str, Any] = {}
        for k, v in value.items():
            out[k], hit = swap_in(v, old, new)
            found = found or hit
        return out, found
    if isinstance(value, list | tuple):
        items = []
        found = False
        for v in value:
            item, hit = swap_in(v, old, new)
            items.append(item)
            found = found or hit
        return items, found
    return value, False
