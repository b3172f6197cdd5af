"""Items for ledger messages that never were items (summaries, crash repairs, other hosts).

A message made from an item returns that item (see :mod:`.items`); the others are
rendered here from their Converse blocks: text, images and documents become a message
item, a ``toolUse`` a ``function_call``, and a ``toolResult`` the output type that
answers its call (``function_call_output``, ``local_shell_call_output``,
``mcp_approval_response``, ...).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.model.messages import Message

__all__ = ["output_value", "render_message"]


def render_message(message: Message, call_types: Mapping[str, str]) -> list[dict[str, Any]]:
    """The items ``message`` stands for; ``call_types`` maps a toolUseId to its call item type."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            out.append(_message_item(message.role, parts))
            parts.clear()

    for block in message.content:
        if "toolUse" in block:
            flush()
            tool = block["toolUse"]
            arguments = tool.get("input")
            out.append(
                {
                    "type": "function_call",
                    "call_id": tool["toolUseId"],
                    "name": str(tool.get("name", "")),
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                }
            )
        elif "toolResult" in block:
            flush()
            result = block["toolResult"]
            out.append(_output_item(call_types.get(result["toolUseId"], "function_call"), result))
        elif "reasoningContent" in block:
            # A reasoning item cannot be replayed without the id the model gave it.
            continue
        else:
            parts.append(_render_part(block, message.role))
    flush()
    return out


def _message_item(role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    if len(parts) == 1 and parts[0].get("type") in ("input_text", "output_text"):
        return {"role": role, "content": parts[0]["text"]}
    return {"role": role, "content": list(parts)}


def _render_part(block: Mapping[str, Any], role: str) -> dict[str, Any]:
    if isinstance(block.get("text"), str):
        return {"type": "output_text" if role == "assistant" else "input_text", "text": block["text"]}
    if "image" in block and isinstance(block["image"], Mapping):
        source = block["image"].get("source") or {}
        if isinstance(source.get("bytes"), bytes):
            fmt = str(block["image"].get("format", "png"))
            data = base64.b64encode(source["bytes"]).decode("ascii")
            return {"type": "input_image", "image_url": f"data:image/{fmt};base64,{data}", "detail": "auto"}
        if isinstance(source.get("url"), str):
            return {"type": "input_image", "image_url": source["url"], "detail": "auto"}
        if isinstance(source.get("fileId"), str):
            return {"type": "input_image", "file_id": source["fileId"], "detail": "auto"}
    if "document" in block and isinstance(block["document"], Mapping):
        document = block["document"]
        source = document.get("source") or {}
        part: dict[str, Any] = {"type": "input_file", "filename": str(document.get("name", "file"))}
        if isinstance(source.get("bytes"), bytes):
            part["file_data"] = base64.b64encode(source["bytes"]).decode("ascii")
            return part
        if isinstance(source.get("url"), str):
            part["file_url"] = source["url"]
            return part
        if isinstance(source.get("fileId"), str):
            part["file_id"] = source["fileId"]
            return part
    if "json" in block and isinstance(block["json"], Mapping) and isinstance(block["json"].get("type"), str):
        return copy.deepcopy(dict(block["json"]))
    body = block.get("json", block)
    return {"type": "input_text", "text": json.dumps(body, default=_bytes_as_text)}


def _output_item(call_type: str, result: Mapping[str, Any]) -> dict[str, Any]:
    call_id = result["toolUseId"]
    content = result.get("content", [])
    failed = result.get("status") == "error"
    text = output_value(content, text_only=True)
    if call_type == "mcp_approval_request":
        return {"type": "mcp_approval_response", "approval_request_id": call_id, "approve": False, "reason": text}
    if call_type == "local_shell_call":
        return {"type": "local_shell_call_output", "call_id": call_id, "output": text}
    if call_type == "apply_patch_call":
        return {
            "type": "apply_patch_call_output",
            "call_id": call_id,
            "status": "failed" if failed else "completed",
            "output": text,
        }
    if call_type == "shell_call":
        outcome = {"type": "exit", "exit_code": 1 if failed else 0}
        return {
            "type": "shell_call_output",
            "call_id": call_id,
            "output": [{"stdout": "" if failed else text, "stderr": text if failed else "", "outcome": outcome}],
        }
    if call_type == "computer_call":
        screenshots = [_render_part(b, "user") for b in content if "image" in b]
        if screenshots and screenshots[0]["type"] == "input_image":
            shot = {k: v for k, v in screenshots[0].items() if k in ("image_url", "file_id")}
            return {
                "type": "computer_call_output",
                "call_id": call_id,
                "output": {"type": "computer_screenshot", **shot},
            }
    kind = "custom_tool_call_output" if call_type == "custom_tool_call" else "function_call_output"
    return {
        "type": kind,
        "call_id": call_id,
        "output": output_value(content, text_only=kind != "function_call_output"),
    }


def output_value(content: Sequence[Mapping[str, Any]], *, text_only: bool) -> Any:
    """A tool output: one string when the result is text, else a list of input parts."""
    if all(isinstance(b.get("text"), str) for b in content):
        return "\n".join(b["text"] for b in content)
    if text_only:
        return "\n".join(
            b["text"] if isinstance(b.get("text"), str) else json.dumps(b, default=_bytes_as_text) for b in content
        )
    return [_render_part(b, "user") for b in content]


def _bytes_as_text(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
