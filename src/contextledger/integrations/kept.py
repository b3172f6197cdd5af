"""A host's own message, kept as JSON text next to the ledger blocks it projects to.

An integration stores each host message as a :class:`~contextledger.Message` whose
content is the message's projection into the ledger's blocks and whose metadata keeps
the host message itself, under the host's key, as the JSON text the host's own
serializer wrote (``{"json": text, "text_digest": ...}``). Text, not a parsed value: a
restore hands it to the host's parser as it is (one C-level parse, no walk over frozen
containers), and a store reads one string.

``text_digest`` fingerprints the content the message was stored with -- the JSON text
every store writes for it -- so :func:`unchanged` tells, without parsing the host
message again, whether a manager has since revised it (a truncated tool result), in
which case the integration renders the revision. A restored message that still holds
the text it was read from is checked by hashing that text, without parsing it.

Messages kept before 0.3 differ by host: Pydantic AI's carry ``digest``, the fingerprint
of the compact text, and are still checked against it; LangChain's carry none, and the
integration tells a revision apart by projecting the rebuilt host message again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.model.jsonvalues import dumps_encoded
from contextledger.model.messages import Message
from contextledger.model.pending import held_text

__all__ = ["content_digest", "fingerprinted", "kept", "kept_text", "unchanged"]

TEXT_DIGEST = "text_digest"
"""The metadata key of the content's fingerprint (see :func:`content_digest`)."""
_COMPACT_DIGEST = "digest"
"""The key of the fingerprint of the content's compact text, which messages kept before 0.3 carry."""


def content_digest(content: Sequence[Mapping[str, Any]]) -> str:
    """A short fingerprint of content blocks: the JSON text the stores write for them, hashed."""
    return _fingerprint(dumps_encoded(content))


def _fingerprint(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def kept(text: str, content: Sequence[Mapping[str, Any]] | None = None) -> dict[str, str]:
    """The metadata value that keeps a host message's JSON ``text`` (stored with ``content``, to check later).

    Without ``content`` no digest is kept: the integration tells a revision apart by
    projecting the rebuilt host message again (cheaper when it rebuilds it anyway).
    """
    if content is None:
        return {"json": text}
    return {"json": text, TEXT_DIGEST: content_digest(content)}


def fingerprinted(message: Message, key: str) -> bool:
    """Whether the host message kept under ``key`` carries the fingerprint :func:`unchanged` checks."""
    value = message.metadata.get(key)
    return isinstance(value, Mapping) and (TEXT_DIGEST in value or _COMPACT_DIGEST in value)


def kept_text(message: Message, key: str) -> str | None:
    """The host message's JSON text kept under ``key``, or ``None`` when the message has none."""
    value = message.metadata.get(key)
    text = value.get("json") if isinstance(value, Mapping) else None
    return text if isinstance(text, str) else None


def unchanged(message: Message, key: str) -> bool:
    """Whether ``message`` still holds the content its kept host message was stored with.

    A restored message holding the text it was read from is first checked by hashing
    that text: equal fingerprints mean the text is the one written for the kept
    content. A store may write other text for the same content (PostgreSQL's ``jsonb``
    orders keys its own way); then, as for every other message, the content is read
    (without decoding it) and its text made again.
    """
    value = message.metadata.get(key)
    if not isinstance(value, Mapping):
        return False
    digest = value.get(TEXT_DIGEST)
    if digest is None:
        compact = dumps_encoded(message.peek_content(), compact=True)
        return value.get(_COMPACT_DIGEST) == _fingerprint(compact)
    held = held_text(message)
    if held is not None and _fingerprint(held) == digest:
        return True
    # Read without decoding: a restored message keeps holding its stored text.
    return bool(digest == content_digest(message.peek_content()))
