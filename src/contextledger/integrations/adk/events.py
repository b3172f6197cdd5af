"""Lossless mapping between ADK events and ledger messages, and the model input a view renders to.

One persisted ADK :class:`~google.adk.events.Event` is one ledger :class:`~contextledger.Message`:

* ``message_id`` is the event's ``id``; the role is ``user`` for the user's events and
  function responses (ADK gives them the ``user`` content role), ``assistant`` otherwise;
* the content blocks are the *projection* of the event's parts, one block per part, that
  every manager, token counter and summarizer understands: text -> ``text``, a thought ->
  ``reasoningContent``, a ``function_call`` -> ``toolUse`` and a ``function_response`` ->
  ``toolResult`` under the call's id (so a call and its response are one tool pair,
  evicted, pinned and summarized together), inline or file data -> ``image`` /
  ``document`` (bytes stay in the event), anything else -> ``json`` naming the part;
  an event without content (a state change) has no blocks;
* the event itself is kept whole in ``metadata["adk"]["event"]`` as the JSON text ADK's
  own SQLite service stores (``model_dump_json(exclude_none=True)``), so
  :func:`message_to_event` gives back an equal event, parsed and validated in one step
  by pydantic (a text, not a nested value, so reading a session does not walk and copy
  every event's structure twice); beside it, ``timestamp`` and ``compaction`` say when
  the event happened and whether it compacts (what the ledger's own code reads). The
  model's reported usage is copied to ``metadata["usage"]`` so proactive compression
  sees real token counts.

The model input (:func:`contents_of`) renders each active entry: a message whose blocks
are still its event's projection gives the event's content unchanged; a message a
manager revised (a truncated function response) is rendered part by part, the revised
blocks from themselves and the rest from the event; a summary is a ``user`` text content;
a message that never was an event (a crash repair's function response, an erased
entry) is rendered from its blocks. Entries with nothing visible (a state change) are
left out, as ADK leaves them out.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.adk.events import Event
from google.genai import types
from pydantic import ValidationError

from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.model.messages import ContentBlock, Message, Role, thaw
from contextledger.model.records import HistoryEntry, ViewEntry

__all__ = [
    "EVENT_KEY",
    "adk_ids",
    "content_of",
    "contents_of",
    "event_to_message",
    "kept_event",
    "ledger_session_id",
    "message_to_event",
    "project_content",
]

EVENT_KEY = "adk"
"""``Message.metadata[EVENT_KEY]``: ``event`` (the event's JSON text), ``timestamp``, ``compaction``."""

_SEPARATOR = "/"


def ledger_session_id(app_name: str, user_id: str, session_id: str) -> str:
    """The ledger's session id of an ADK session: ``app/user/session``, each part percent-encoded.

    ADK names a session by its app, its user and its id together (two users may both have
    a session ``s1``); the ledger by one id. In each part ``%`` and ``/`` are escaped
    (``%25``, ``%2F``; every other character is kept), so two ADK sessions never share a
    ledger id and :func:`adk_ids` inverts it.

    Raises:
        ConfigurationError: A part is empty, or the id is longer than the ledger keeps (255).
    """
    for name, value in (("app_name", app_name), ("user_id", user_id), ("session_id", session_id)):
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")
    key = _SEPARATOR.join(_escape(part) for part in (app_name, user_id, session_id))
    if len(key) > 255:
        raise ConfigurationError(
            f"the ledger id of ADK session {session_id!r} (app {app_name!r}, user {user_id!r}) is {len(key)}"
            " characters long; the ledger keeps ids of at most 255"
        )
    return key


def adk_ids(ledger_id: str) -> tuple[str, str, str]:
    """``(app_name, user_id, session_id)`` of a ledger session id made by :func:`ledger_session_id`.

    Raises:
        ConfigurationError: ``ledger_id`` is not one.
    """
    parts = ledger_id.split(_SEPARATOR)
    if len(parts) != 3 or not all(parts):
        raise ConfigurationError(f"{ledger_id!r} is not the ledger id of an ADK session (app/user/session)")
    app_name, user_id, session_id = (_ESCAPED.sub(lambda m: _UNESCAPE[m.group(0)], part) for part in parts)
    return app_name, user_id, session_id


_ESCAPED = re.compile("%25|%2F")
_UNESCAPE = {"%25": "%", "%2F": "/"}


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


# -- events -> messages ------------------------------------------------------------------------


def event_to_message(event: Event, *, message_id: str | None = None) -> Message:
    """The ledger message of one (non-partial) event; the event is kept whole in its metadata.

    Args:
        event: The event.
        message_id: The entry id (default: the event's id; the service passes another only
            when a different event already holds that id).

    Raises:
        InvalidMessage: The event has no id, holds text no store keeps (a lone surrogate),
            or holds a value with no JSON form (one that holds itself).
    """
    entry_id = message_id or event.id
    if not entry_id:
        raise InvalidMessage("an ADK event needs an id to be stored (ADK gives every event one)")
    compacts = event.actions is not None and event.actions.compaction is not None
    try:
        dumped = event.model_dump_json(exclude_none=True)
    except ValueError as exc:  # pydantic's serialization error: a value that holds itself, say
        raise InvalidMessage(f"ADK event {entry_id} cannot be stored as JSON: {exc}") from exc
    metadata: dict[str, Any] = {
        EVENT_KEY: {
            "event": dumped,
            "timestamp": event.timestamp,
            "compaction": compacts,
        }
    }
    usage = event.usage_metadata
    if usage is not None and usage.prompt_token_count is not None:
        metadata["usage"] = {
            "inputTokens": usage.prompt_token_count,
            "outputTokens": usage.candidates_token_count or 0,
            "totalTokens": usage.total_token_count or usage.prompt_token_count + (usage.candidates_token_count or 0),
        }
    return Message(message_id=entry_id, role=_role(event), content=project_content(event.content), metadata=metadata)


def _role(event: Event) -> Role:
    if event.content is not None and event.content.role is not None:
        return "user" if event.content.role == "user" else "assistant"
    return "user" if event.author == "user" else "assistant"


def project_content(content: types.Content | None) -> list[ContentBlock]:
    """The content blocks of an event's content: one block per part (see the module docstring)."""
    if content is None or not content.parts:
        return []
    return [_project_part(part, index) for index, part in enumerate(content.parts)]


def _project_part(part: types.Part, index: int) -> ContentBlock:
    if part.function_call is not None:
        call = part.function_call
        return {
            "toolUse": {
                "toolUseId": call.id or f"adk-call-{index}",
                "name": call.name or "",
                "input": _jsonable(call.args or {}),
            }
        }
    if part.function_response is not None:
        response = part.function_response
        return {
            "toolResult": {
                "toolUseId": response.id or f"adk-call-{index}",
                "status": "success",
                "content": [{"json": _jsonable(response.response or {})}],
            }
        }
    if part.text is not None:
        if part.thought:
            return {"reasoningContent": {"reasoningText": {"text": part.text}}}
        return {"text": part.text}
    data = part.inline_data or part.file_data
    if data is not None and data.mime_type:
        kind, _, subtype = data.mime_type.partition("/")
        name = getattr(data, "display_name", None) or ""
        if kind == "image":
            return {"image": {"format": subtype, "name": name}}
        return {"document": {"format": subtype or kind, "name": name}}
    kinds = sorted(name for name, value in part if value is not None)
    return {"json": {"adkPart": kinds}}


def _jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, inf_nan_mode="null")


# -- messages -> events --------------------------------------------------------------------------


def kept_event(message: Message) -> Event | None:
    """The event a message was made from, or ``None`` (a summary, a repair, an erased entry...).

    Raises:
        InvalidMessage: The kept event is not one ADK reads back.
    """
    kept = message.metadata.get(EVENT_KEY)
    if not isinstance(kept, Mapping) or not isinstance(kept.get("event"), str):
        return None
    try:
        # Parsed from text: every value (state deltas, call args) reaches ADK plain and mutable.
        return Event.model_validate_json(kept["event"])
    except ValidationError as exc:
        raise InvalidMessage(f"message {message.message_id} keeps an event ADK cannot read: {exc}") from exc


def message_to_event(entry: HistoryEntry) -> Event:
    """The event of one history entry: the kept event, else one built from the message.

    A message that never was an event (the function response a crash repair appended,
    an erased entry, a message written by another host) becomes an event authored by
    ``user`` or ``model`` after its role, stamped with the time it was stored.
    """
    event = kept_event(entry.message)
    if event is not None:
        return event
    message = entry.message
    return Event(
        id=message.message_id,
        author="user" if message.role == "user" else "model",
        content=content_of(message),
        timestamp=entry.created_at.timestamp(),
    )


# -- views -> model input ---------------------------------------------------------------------------


Rendered = dict[str, tuple[Message, "types.Content | None"]]
"""Per entry id, a message shown as its kept event's content unchanged, and that content (never handed out)."""


def contents_of(entries: Iterable[ViewEntry], rendered: Rendered | None = None) -> list[types.Content]:
    """The model input a view renders to: one content per entry with something to show, in order.

    A call's name is looked up by id for a function response rendered from blocks (a
    crash repair's, whose event never existed). Every content returned is a new object
    the caller may change.

    Args:
        entries: The view's entries.
        rendered: Kept across calls on one conversation (the LedgerPlugin's, one per
            conversation): the contents of the messages shown as their kept event's
            content, each parsed once (a message never changes; only its entry's message
            object is compared). Left holding the entries of ``entries`` only.
    """
    listed = list(entries)
    names = {
        block["toolUse"]["toolUseId"]: str(block["toolUse"].get("name") or "")
        for entry in listed
        for block in entry.message.content
        if "toolUse" in block
    }
    out: list[types.Content] = []
    kept: Rendered = {}
    for entry in listed:
        if entry.kind == "summary":
            out.append(types.Content(role="user", parts=[types.Part(text=entry.message.plain_text)]))
            continue
        message = entry.message
        hit = rendered.get(entry.entry_id) if rendered is not None else None
        if hit is not None and hit[0] is message:
            shown = hit[1]
        else:
            original = _original(message)
            if not _unchanged(original, message):  # revised, repaired or another host's: from its blocks
                content = _rendered(message, original, names)
                if content is not None:
                    out.append(content)
                continue
            shown = original if original is not None and _visible(original) else None
        kept[entry.entry_id] = (message, shown)
        if shown is not None:
            out.append(shown.model_copy(deep=True))  # the kept one is never handed out
    if rendered is not None:
        rendered.clear()
        rendered.update(kept)
    return out


def content_of(message: Message, names: Mapping[str, str] | None = None) -> types.Content | None:
    """The content one message gives the model, or ``None`` when it has nothing to show."""
    original = _original(message)
    if _unchanged(original, message):  # parsed here for this call alone: handed out as it is
        return original if original is not None and _visible(original) else None
    return _rendered(message, original, names or {})


def _original(message: Message) -> types.Content | None:
    """The content of the event ``message`` was made from, parsed from its kept event (``None``: none kept)."""
    event = kept_event(message)
    return event.content if event is not None else None


def _unchanged(original: types.Content | None, message: Message) -> bool:
    """Whether ``message`` shows ``original`` unchanged (else it is rendered from its blocks)."""
    return (
        original is not None
        and bool(original.parts)
        and project_content(original) == thaw([dict(b) for b in message.content])
    )


def _rendered(message: Message, original: types.Content | None, names: Mapping[str, str]) -> types.Content | None:
    """The content of a message that does not show its kept event's content unchanged, rendered from its blocks."""
    blocks = [dict(b) for b in message.content]
    parts_of_event = list(original.parts or []) if original is not None else []
    pairs: Sequence[types.Part | None] = parts_of_event if len(parts_of_event) == len(blocks) else [None] * len(blocks)
    parts = [p for p in (_render_block(b, o, names) for b, o in zip(blocks, pairs, strict=True)) if p is not None]
    if not parts:
        return None
    role = original.role if original is not None and original.role else ("user" if message.role == "user" else "model")
    content = types.Content(role=role, parts=parts)
    return content if _visible(content) else None


def _render_block(block: Mapping[str, Any], original: types.Part | None, names: Mapping[str, str]) -> types.Part | None:
    if "text" in block:
        return _with(original, text=block["text"], thought=None)
    if "reasoningContent" in block:
        text = block["reasoningContent"].get("reasoningText", {}).get("text", "")
        return _with(original, text=text, thought=True)
    if "toolUse" in block:
        use = block["toolUse"]
        call = types.FunctionCall(
            id=use["toolUseId"], name=use.get("name") or None, args=copy.deepcopy(use.get("input"))
        )
        return _with(original, function_call=call)
    if "toolResult" in block:
        result = block["toolResult"]
        call_id = result["toolUseId"]
        name = (
            original.function_response.name
            if original is not None and original.function_response is not None
            else names.get(call_id)
        )
        response = types.FunctionResponse(id=call_id, name=name or None, response=_response_of(result))
        return _with(original, function_response=response)
    return original.model_copy(deep=True) if original is not None else None


def _with(original: types.Part | None, **fields: Any) -> types.Part:
    """``original`` with ``fields`` set (its other fields, e.g. a thought signature, kept), or a new part."""
    if original is None:
        return types.Part(**{k: v for k, v in fields.items() if v is not None})
    return original.model_copy(deep=True, update=fields)


def _response_of(result: Mapping[str, Any]) -> dict[str, Any]:
    content = result.get("content") or []
    if len(content) == 1 and isinstance(content[0], Mapping) and isinstance(content[0].get("json"), Mapping):
        response: dict[str, Any] = copy.deepcopy(thaw(content[0]["json"]))
        return response
    texts = [str(b["text"]) for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    return {"result": "\n".join(texts)}


def _visible(content: types.Content) -> bool:
    """Whether ADK would send the content: a role and a part with something in it (or a thought signature)."""
    if not content.role or not content.parts:
        return False
    return any(
        part.function_call is not None
        or part.function_response is not None
        or part.thought_signature
        or part.text
        or part.inline_data is not None
        or part.file_data is not None
        or part.executable_code is not None
        or part.code_execution_result is not None
        for part in content.parts
    )
