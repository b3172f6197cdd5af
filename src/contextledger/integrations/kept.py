"""A host's own message, kept as JSON text next to the ledger blocks it projects to.

An integration stores each host message as a :class:`~contextledger.Message` whose
content is the message's projection into the ledger's blocks and whose metadata keeps
the host message itself, under the host's key, as the JSON text the host's own
serializer wrote (``{"json": text, "digest": ...}``). Text, not a parsed value: a
restore hands it to the host's parser as it is (one C-level parse, no walk over frozen
containers), and a store reads one string.

``digest`` fingerprints the content the message was stored with, so :func:`unchanged`
tells -- without parsing the host message again -- whether a manager has since revised
it (a truncated tool result), in which case the integration renders the revision. An
integration that rebuilds every host message anyway (LangChain) projects it again
instead and keeps no digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.model.jsonvalues import dumps_encoded
from contextledger.model.messages import Message

__all__ = ["content_digest", "kept", "kept_text", "unchanged"]


def content_digest(content: Sequence[Mapping[str, Any]]) -> str:
    """A short fingerprint of content blocks (their compact JSON text, hashed)."""
    return hashlib.blake2b(dumps_encoded(content, compact=True).encode(), digest_size=12).hexdigest()


def kept(text: str, content: Sequence[Mapping[str, Any]] | None = None) -> dict[str, str]:
    """The metadata value that keeps a host message's JSON ``text`` (stored with ``content``, to check later).

    Without ``content`` no digest is kept: the integration tells a revision apart by
    projecting the rebuilt host message again (cheaper when it rebuilds it anyway).
    """
    if content is None:
        return {"json": text}
    return {"json": text, "digest": content_digest(content)}


def kept_text(message: Message, key: str) -> str | None:
    """The host message's JSON text kept under ``key``, or ``None`` when the message has none."""
    value = message.metadata.get(key)
    text = value.get("json") if isinstance(value, Mapping) else None
    return text if isinstance(text, str) else None


def unchanged(message: Message, key: str) -> bool:
    """Whether ``message`` still holds the content its kept host message was stored with."""
    value = message.metadata.get(key)
    # Read without decoding: a restored message keeps holding its stored text.
    return isinstance(value, Mapping) and value.get("digest") == content_digest(message.peek_content())
