"""Lossless mapping between OpenAI Responses input items and ledger messages.

The OpenAI Agents SDK keeps a session as a list of Responses input items (plain dicts,
``TResponseInputItem``). The ledger's canonical format is Converse content blocks, which
every manager, token counter and summarizer understands. Each item becomes one
:class:`~contextledger.Message` whose content is the item's *projection* into blocks,
and which keeps the item itself, verbatim, in ``metadata["openai"]["item"]`` (with
``metadata["openai"]["text_digest"]``, the fingerprint of the content it was stored with):

=================================  ==========  ==========================================
item ``type``                      role        content blocks
=================================  ==========  ==========================================
``message`` (or no type)           its role    ``text`` / ``image`` / ``document`` /
                                   (developer  ``audio``; an unknown part as ``json``
                                   -> system)
``function_call``, ``custom_tool_  assistant   ``toolUse`` with ``toolUseId = call_id``
call``, ``computer_call``,
``local_shell_call``,
``shell_call``,
``apply_patch_call``
``mcp_approval_request``           assistant   ``toolUse`` with ``toolUseId = id``
``*_output`` of those              user        ``toolResult`` with the same ``toolUseId``
``mcp_approval_response``          user        ``toolResult`` for ``approval_request_id``
``reasoning``                      assistant   ``reasoningContent`` (summary and text)
``image_generation_call``          assistant   ``image`` (when it has a result)
anything else (hosted calls,       its role or ``json`` holding the item
unknown types)                     assistant
no ``type`` and no ``role`` (a     user        ``json`` holding the item
wrapper's envelope, e.g. the
SDK's ``EncryptedSession``)
=================================  ==========  ==========================================

Because a call and its output share a ``toolUseId``, every manager treats them as one
tool pair: evicted, pinned and summarized together.

Back from messages: :mod:`~contextledger.integrations.openai_agents.rendering`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from contextledger.errors import InvalidMessage
from contextledger.integrations.kept import TEXT_DIGEST, content_digest
from contextledger.model.jsonvalues import MAX_DEPTH
from contextledger.model.messages import ContentBlock, Message, Role

__all__ = [
    "CALL_OUTPUT_TYPES",
    "ITEM_KEY",
    "OPAQUE_ROLE",
    "item_to_message",
    "items_to_messages",
    "project_item",
]


ITEM_KEY = "openai"
"""``Message.metadata[ITEM_KEY]["item"]`` holds the original item."""

CALL_OUTPUT_TYPES: dict[str, str] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "mcp_approval_request": "mcp_approval_response",
}
"""Each client-side call type and the output type that answers it (the SDK's pairs)."""

OPAQUE_ROLE: Role = "user"
"""The role of an item with neither a ``type`` nor a ``role``: any view may open with it."""

_OUTPUT_CALL_TYPES = {output: call for call, output in CALL_OUTPUT_TYPES.items()}
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


# -- items -> messages ---------------------------------------------------------------------


def item_to_message(item: Mapping[str, Any]) -> Message:
    """The ledger message for one input item; the item is kept verbatim in its metadata.

    Raises:
        InvalidMessage: ``item`` is not a JSON object of JSON values (a tuple, bytes or a
            non-finite float would not come back equal; nested more than
            ``MAX_DEPTH`` levels deep, or holding itself), or a known item type lacks a
            field the mapping needs (a call without a string ``call_id``, a message
            without ``content``). Any other JSON object is kept exactly as given.
    """
    _check_item(item)
    # A shallow copy: the message freezes its own copy of every container of the item
    # (its content and metadata are read-only), so nothing here aliases the caller's item.
    kept = dict(item)
    role, content = project_item(kept)
    # The content's fingerprint: a restore tells an unrevised message by hashing the text
    # it read, without decoding the content or projecting the item again.
    box = {"item": kept, TEXT_DIGEST: content_digest(content)}
    return Message(role=role, content=content, metadata={ITEM_KEY: box})


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Map ``items`` in order with :func:`item_to_message`; nothing is built if one is invalid.

    Raises:
        InvalidMessage: An item is invalid (its index is named).
    """
    out = []
    for index, item in enumerate(items):
        try:
            out.append(item_to_message(item))
        except InvalidMessage as exc:
            raise InvalidMessage(f"item {index}: {exc}") from exc
    return out


def project_item(item: Mapping[str, Any]) -> tuple[Role, list[ContentBlock]]:
    """The role and content blocks an item stands for in the ledger (a pure function).

    Raises:
        InvalidMessage: A known item type lacks a field the mapping needs.
    """
    kind = item.get("type")
    if kind in (None, "message") and "role" in item:
        return _project_message(item)
    if kind in CALL_OUTPUT_TYPES:
        call_id = _call_id(item, "id" if kind == "mcp_approval_request" else "call_id")
        return "assistant", [{"toolUse": {"toolUseId": call_id, "name": _tool_name(item), "input": _tool_input(item)}}]
    if kind in _OUTPUT_CALL_TYPES:
        return "user", [{"toolResult": _project_output(item)}]
    if kind == "reasoning":
        return "assistant", [{"reasoningContent": {"reasoningText": {"text": _reasoning_text(item)}}}]
    if kind == "image_generation_call" and isinstance(item.get("result"), str):
        image = _image_from_base64(item["result"], "png")
        if image is not None:
            return "assistant", [image]
    if kind is None or not isinstance(kind, str):
        # An item the mapping cannot read (a wrapper's envelope, such as the SDK's
        # EncryptedSession stores): kept as it is, opaque to the managers.
        return OPAQUE_ROLE, [{"json": copy.deepcopy(dict(item))}]
    role = _ROLES.get(item["role"], "assistant") if isinstance(item.get("role"), str) else "assistant"
    return role, [{"json": copy.deepcopy(dict(item))}]


def _project_message(item: Mapping[str, Any]) -> tuple[Role, list[ContentBlock]]:
    role = item["role"]
    if not isinstance(role, str) or role not in _ROLES:
        raise InvalidMessage(f"a message item's role is one of {sorted(_ROLES)}, got {role!r}")
    content = item.get("content")
    if isinstance(content, str):
        return _ROLES[role], [{"text": content}]
    if not isinstance(content, list):
        raise InvalidMessage(f"a message item's content is a string or a list of parts, got {type(content).__name__}")
    return _ROLES[role], [_project_part(part) for part in content]


def _project_part(part: Any) -> ContentBlock:
    """One content part of a message or a tool output as a content block."""
    if not isinstance(part, Mapping):
        return {"json": copy.deepcopy(part)}
    kind = part.get("type")
    if kind in ("input_text", "output_text", "summary_text", "reasoning_text") and isinstance(part.get("text"), str):
        return {"text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"text": part["refusal"]}
    if kind in ("input_image", "computer_screenshot"):
        url = part.get("image_url")
        if isinstance(url, str):
            image = _image_from_data_url(url)
            if image is not None:
                return image
            return {"image": {"source": {"url": url}}}
        if isinstance(part.get("file_id"), str):
            return {"image": {"source": {"fileId": part["file_id"]}}}
    if kind == "input_file":
        name = part.get("filename") if isinstance(part.get("filename"), str) else None
        document: dict[str, Any] = {"name": name or "file"}
        data = part.get("file_data")
        # file_data is base64, bare or as a data URL.
        decoded = (
            _decode_base64(data.partition(",")[2] if data.startswith("data:") else data)
            if isinstance(data, str)
            else None
        )
        if decoded is not None:
            document["source"] = {"bytes": decoded}
        elif isinstance(part.get("file_url"), str):
            document["source"] = {"url": part["file_url"]}
        elif isinstance(part.get("file_id"), str):
            document["source"] = {"fileId": part["file_id"]}
        else:
            return {"json": copy.deepcopy(dict(part))}
        return {"document": document}
    if kind == "input_audio" and isinstance(part.get("input_audio"), Mapping):
        audio = part["input_audio"]
        decoded = _decode_base64(audio.get("data")) if isinstance(audio.get("data"), str) else None
        if decoded is not None:
            return {"audio": {"format": str(audio.get("format", "wav")), "source": {"bytes": decoded}}}
    return {"json": copy.deepcopy(dict(part))}


def _project_output(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item["type"]
    if kind == "mcp_approval_response":
        call_id = _call_id(item, "approval_request_id")
        body = {k: copy.deepcopy(item[k]) for k in ("approve", "reason") if k in item}
        return {"toolUseId": call_id, "status": "success", "content": [{"json": body}]}
    # The SDK writes local_shell_call_output with call_id; the API schema names it id.
    key = "id" if kind == "local_shell_call_output" and "call_id" not in item else "call_id"
    call_id = _call_id(item, key)
    output = item.get("output")
    status = "error" if item.get("status") == "failed" else "success"
    if isinstance(output, str):
        content: list[ContentBlock] = [{"text": output}]
    elif isinstance(output, list):
        content = [_project_part(part) for part in output]
    elif isinstance(output, Mapping):
        content = [_project_part(output)]
    else:
        content = [] if output is None else [{"json": copy.deepcopy(output)}]
    return {"toolUseId": call_id, "status": status, "content": content}


def _call_id(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidMessage(f"a {item.get('type')} item needs a non-empty string {key!r}, got {value!r}")
    return value


def _tool_name(item: Mapping[str, Any]) -> str:
    name = item.get("name")
    if isinstance(name, str) and name:
        return name
    return str(item["type"]).removesuffix("_call")


def _tool_input(item: Mapping[str, Any]) -> Any:
    for key in ("arguments", "input", "action", "actions", "operation"):
        if key in item:
            value = item[key]
            if key == "arguments" and isinstance(value, str):
                try:
                    return json.loads(value)
                except ValueError:
                    return value
            return copy.deepcopy(value)
    return {}


def _reasoning_text(item: Mapping[str, Any]) -> str:
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        if isinstance(parts, list):
            texts.extend(p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return "\n".join(texts)


_MIME_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}


def _image_from_data_url(url: str) -> ContentBlock | None:
    head, sep, data = url.partition(",")
    if not (sep and head.startswith("data:") and head.endswith(";base64")):
        return None
    mime = head.removeprefix("data:").removesuffix(";base64")
    if mime not in _MIME_FORMATS:
        return None
    return _image_from_base64(data, _MIME_FORMATS[mime])


def _image_from_base64(data: str, fmt: str) -> ContentBlock | None:
    decoded = _decode_base64(data)
    return None if decoded is None else {"image": {"format": fmt, "source": {"bytes": decoded}}}


def _decode_base64(data: str) -> bytes | None:
    """Strictly decoded bytes, or ``None`` when ``data`` would not re-encode to itself."""
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return decoded if base64.b64encode(decoded).decode("ascii") == data else None


def _check_item(item: Any) -> None:
    if not isinstance(item, dict):
        raise InvalidMessage(f"an item is a dict, got {type(item).__name__}")
    _check_json(item, "item", 0)


def _check_json(value: Any, where: str, depth: int) -> None:
    # Bounded as a message's own values are: an item that holds itself (or is nested past
    # what any store keeps) is refused here, not walked until the interpreter's stack ends.
    if isinstance(value, dict | list) and depth >= MAX_DEPTH:
        raise InvalidMessage(f"the item is nested more than {MAX_DEPTH} levels deep (or holds itself)")
    if isinstance(value, dict):
        for key, inner in value.items():
            if not isinstance(key, str):
                raise InvalidMessage(f"{where}: keys are strings, got {key!r}")
            _check_json(inner, f"{where}.{key}", depth + 1)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _check_json(inner, f"{where}[{index}]", depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessage(f"{where}: {value!r} is not a JSON number")
    elif not (value is None or isinstance(value, str | int | bool)):
        raise InvalidMessage(f"{where}: a {type(value).__name__} is not a JSON value and would not come back equal")
