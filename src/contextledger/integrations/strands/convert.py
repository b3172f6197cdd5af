"""Translation between Strands message dicts and ledger entries.

Strands keeps a message's durable id in ``tracking_id``; the ledger uses it as the
``message_id`` (and as the ``summary_id`` of a Strands summary message), so a message
is the same entry on both sides.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from contextledger.errors import InvalidMessage
from contextledger.model.messages import decode_blocks, encode_blocks, new_message_id
from contextledger.model.records import ViewEntry

__all__ = [
    "decode_json",
    "encode_json",
    "ensure_tracking_ids",
    "is_pinned_dict",
    "render_entry",
    "tracking_id",
]


def tracking_id(message: Mapping[str, Any]) -> str:
    """The message's ``tracking_id``.

    Raises:
        InvalidMessage: The message has none (call :func:`ensure_tracking_ids` first).
    """
    value = message.get("tracking_id")
    if not isinstance(value, str) or not value:
        raise InvalidMessage(f"Strands message without a tracking_id: {message.get('role')!r} message")
    return value


def ensure_tracking_ids(messages: Sequence[MutableMapping[str, Any]]) -> None:
    """Give every message without a usable ``tracking_id`` a fresh one, in place.

    Strands does the same before each model call; doing it at sync time lets messages
    put into ``agent.messages`` directly be stored under their final id.
    """
    for message in messages:
        if not message.get("tracking_id"):
            message["tracking_id"] = new_message_id()


def is_pinned_dict(message: Mapping[str, Any]) -> bool:
    """Whether a Strands message dict carries ``metadata.custom.pinned``."""
    metadata = message.get("metadata")
    if metadata is None:  # the common case, checked first: this runs for every message of every sync
        return False
    # type() first: an ABC isinstance costs more than the rest of the check.
    custom = metadata.get("custom") if type(metadata) is dict or isinstance(metadata, Mapping) else None
    if custom is None:
        return False
    return (type(custom) is dict or isinstance(custom, Mapping)) and custom.get("pinned") is True


def render_entry(entry: ViewEntry) -> dict[str, Any]:
    """The Strands message dict for a view entry (a fresh deep copy).

    Empty metadata is left out, as Strands itself leaves it out (``unpin_message``
    deletes an emptied ``metadata``), so a restored message equals the one stored.
    """
    out = entry.message.to_strands()
    out["tracking_id"] = entry.entry_id
    if not out.get("metadata"):
        out.pop("metadata", None)
    return out


def encode_json(value: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-safe deep copy of ``value`` (bytes tagged, as message content is)."""
    return encode_blocks([dict(value)])[0]


def decode_json(value: Mapping[str, Any]) -> dict[str, Any]:
    """Invert :func:`encode_json`."""
    return copy.deepcopy(decode_blocks([value])[0])
