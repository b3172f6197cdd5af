"""The commit script's trailing arguments: pin event rows, the reduction's time, the ttl and the changeset id.

They travel after the variable part that :func:`~contextledger.stores.redis.encode.commit_args`
builds (the script reads them from the end of ``ARGV``), so the content codec and these
audit rows stay independent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from contextledger.core.changeset import Changeset
from contextledger.errors import StoreError
from contextledger.model.records import PinEvent
from contextledger.stores.redis.codec import epoch_micros
from contextledger.stores.redis.listing import as_utc

__all__ = ["pin_event_from", "pin_event_json", "tail_args"]


_OUTSIDE = {"session_id", "agent_id"}
"""Fields of a pin event its row does not hold: the conversation's keys give them."""


def pin_event_json(event: PinEvent) -> str:
    """The stored row of ``event``: its fields by name (times ISO 8601), the session and agent left to its keys."""
    return json.dumps(event.model_dump(exclude=_OUTSIDE), default=datetime.isoformat, separators=(",", ":"))


def tail_args(changeset: Changeset, now: datetime, ttl_ms: int = 0) -> list[str]:
    """The commit's trailing ARGV: its pin event rows, its reduction's time, the ttl, its id.

    One pin event row (JSON) per pin of ``changeset``, in ``pins`` order; the reduction's
    ``created_at`` in epoch microseconds ('' without a reduction: the script keeps the
    reductions list's order mark with it, see :mod:`~contextledger.stores.redis.listing`);
    the ttl in ms (0: none); then the changeset id.
    """
    reduction = changeset.reduction
    at = "" if reduction is None else str(epoch_micros(as_utc(reduction.created_at)))
    if not changeset.pins:  # nearly every commit: no event to build
        return [at, str(ttl_ms), changeset.changeset_id]
    return [*(pin_event_json(e) for e in changeset.pin_events(now)), at, str(ttl_ms), changeset.changeset_id]


def pin_event_from(
    raw: bytes, session_id: str, agent_id: str, fill: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> PinEvent:
    """A pin event row as the commit script stored it, its position filled by ``fill`` (see :func:`pin_positions`).

    Raises:
        StoreError: The stored row is not a pin event (changed outside contextledger).
    """
    try:
        return PinEvent.model_validate(fill({**json.loads(raw), "session_id": session_id, "agent_id": agent_id}))
    except (TypeError, ValueError) as exc:  # JSONDecodeError and pydantic's ValidationError are ValueErrors
        raise StoreError(f"corrupt pin event of {session_id}/{agent_id} in the Redis ledger: {exc}") from exc
