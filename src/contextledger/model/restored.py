"""Messages built from stored JSON text: checked in one pass, or holding their content as text until first use.

What the stores' read paths call for every row; each gives exactly what
:meth:`~contextledger.model.message.Message.from_record` gives for the decoded record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextledger.errors import ContextLedgerError
from contextledger.model.message import Message
from contextledger.model.pending import PENDING, set_raw_fields
from contextledger.model.stored import (
    Unusual,
    checked_stored_content_fields,
    checked_text_fields,
    stored_content_fields,
    text_fields,
)
from contextledger.model.trusted import trusted

__all__ = [
    "holding_text",
    "message_from_json",
    "message_from_stored_content",
    "restored_message",
    "restored_record_message",
]


def message_from_json(message_id: str, role: str, content: str | bytes, metadata: str | bytes | None = None) -> Message:
    """:meth:`Message.from_record` of a stored record whose content and metadata are still JSON text.

    Gives exactly what ``Message.from_record({"message_id": message_id, "role": role,
    "content": json.loads(content), "metadata": json.loads(metadata)})`` gives (no
    metadata reads as ``{}``), parsing and freezing the text in one pass and building
    the message without re-validation when the text is what the stores write (see
    :func:`~contextledger.model.stored.load_json_text`); anything else takes that
    general path, which reports it.

    Raises:
        InvalidMessage: The record is not a valid message (as the constructor raises it).
        ValueError: A text is not JSON (``json.JSONDecodeError``).
    """
    try:
        return trusted(Message, text_fields(message_id, role, content, metadata))
    except (Unusual, ContextLedgerError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        pass  # anything unusual takes the general path, which reports it
    record = {"message_id": message_id, "role": role, "content": json.loads(content)}
    return Message.from_record(record if metadata is None else {**record, "metadata": json.loads(metadata)})


def message_from_stored_content(record: Mapping[str, Any], content: str | bytes) -> Message:
    """``Message.from_record({**record, "content": json.loads(content)})``: a record whose content is still JSON text.

    The content is parsed and frozen in one pass as :func:`message_from_json` does.

    Raises:
        InvalidMessage: The record is not a valid message (as the constructor raises it).
        ValueError: ``content`` is not JSON (``json.JSONDecodeError``).
        KeyError: The record has no ``message_id`` or ``role``.
    """
    try:
        return trusted(Message, stored_content_fields(record, content))
    except (Unusual, ContextLedgerError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        pass  # anything unusual takes the general path, which reports it
    return Message.from_record({**record, "content": json.loads(content)})


def restored_message(message_id: str, role: str, content: str | bytes, metadata: str | bytes | None = None) -> Message:
    """:func:`message_from_json`, holding the content as its JSON text until first use.

    What a restore builds for every entry of the view: the record is decoded and checked
    exactly as :func:`message_from_json` does it (a damaged one raises here, not later),
    and then only the text is kept. The content is decoded again -- to the same values --
    the first time anything reads it (``message.content``, equality, pickling,
    ``model_dump``, ...), and from then on held decoded, the text dropped. Asking a
    restored message for its tool ids (all the view's tool-pair rules need of it) or for
    :meth:`~Message.to_strands` does not decode it. Plain text (ASCII, no escapes, no
    bytes) is checked without building the frozen blocks at all. Anything
    :func:`message_from_json` does not take as it is gives its fully decoded message.

    Raises:
        InvalidMessage: The record is not a valid message (as the constructor raises it).
        ValueError: A text is not JSON (``json.JSONDecodeError``).
    """
    try:
        return _holding_text(*checked_text_fields(message_id, role, content, metadata))
    except (Unusual, ContextLedgerError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return message_from_json(message_id, role, content, metadata)


def restored_record_message(record: Mapping[str, Any], content: str | bytes) -> Message:
    """:func:`message_from_stored_content`, holding the content as its JSON text until first use.

    See :func:`restored_message`: the same for a record whose other fields are decoded.

    Raises:
        InvalidMessage: The record is not a valid message (as the constructor raises it).
        ValueError: ``content`` is not JSON (``json.JSONDecodeError``).
        KeyError: The record has no ``message_id`` or ``role``.
    """
    try:
        return _holding_text(*checked_stored_content_fields(record, content))
    except (Unusual, ContextLedgerError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return message_from_stored_content(record, content)


def _holding_text(fields: dict[str, Any], text: str) -> Message:
    """The message of checked ``fields`` (all but the content) holding its content as ``text``."""
    return holding_text(fields["message_id"], fields["role"], fields["metadata"], text)


def holding_text(message_id: str, role: str, metadata: Mapping[str, Any], text: str) -> Message:
    """The message of checked fields holding its content as ``text`` (see :func:`restored_message`).

    For values a restore checked (or that such a message held): nothing is validated here.
    """
    message = trusted(Message, {"message_id": message_id, "role": role, "content": None, "metadata": metadata})
    # A literal of four keys: the smallest dict (one built by unpacking ``fields`` is larger).
    set_raw_fields(message, {"message_id": message_id, "role": role, "metadata": metadata, PENDING: text})
    return message
