"""The vocabularies records share and the stamps they carry.

Triggers, entry kinds and statuses, pin sources, lineage kinds; the clock and the ids
records are stamped with.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, get_args

from contextledger.model.ids import time_ordered_uuid_hex

__all__ = ["TRIGGERS", "EntryKind", "EntryStatus", "LineageKind", "PinSource", "Trigger", "new_id", "utcnow"]

Trigger = Literal["per_turn", "proactive", "reactive", "end_of_invocation", "manual", "restore", "import"]
"""Why a reduction ran. ``restore`` marks the repair of a conversation interrupted mid-tool;
``import`` marks what another store had already evicted when its session was imported."""
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)
"""Every :data:`Trigger`, in the order above."""
PinSource = str
"""Who asked for a pin change: ``api`` (a caller of :meth:`Conversation.pin`), ``model``
(the ``pin_message`` tool), ``host`` (an integration mirroring its host's pins), or
another short name an integration chooses."""
EntryKind = Literal["message", "summary"]
LineageKind = Literal["fork", "copy"]
"""How a conversation was made from another: ``fork`` (:meth:`Ledger.fork`) or ``copy`` (:meth:`Ledger.copy_to`)."""
EntryStatus = Literal["active", "evicted"]


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the ledger uses."""
    return datetime.now(UTC)


def new_id() -> str:
    """A fresh opaque id for summaries and reductions: a time-ordered UUID (version 7) as hex.

    Their tables keep a unique index on it; see :func:`~contextledger.model.ids.time_ordered_uuid_hex`.
    """
    return time_ordered_uuid_hex()
