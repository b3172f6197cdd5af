"""Items exactly as the installed SDK makes them: model output validated by the ``openai``
types and turned into input items by ``ModelResponse.to_input_items()``, plus the tool
outputs the SDK's runner writes."""

from __future__ import annotations

import base64
from typing import Any

from agents.items import ModelResponse
from agents.usage import Usage
from openai.types.responses import ResponseOutputItem
from pydantic import TypeAdapter

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-a-tiny-image-").decode("ascii")
SCREENSHOT = f"data:image/png;base64,{PNG}"

MODEL_OUTPUT: dict[str, dict[str, Any]] = {
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "Hello",
                "annotations": [
                    {
                        "type": "url_citation",
                        "url": "https://example.com",
                        "title": "t",
                        "start_index": 0,
                        "end_index": 5,
                    }
                ],
            },
            {"type": "refusal", "refusal": "I cannot do that."},
        ],
    },
    "reasoning": {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "The user greets me."}],
        "content": [{"type": "reasoning_text", "text": "Greeting detected."}],
        "encrypted_content": "gAAAAB-opaque",
    },
    "function_call": {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
        "status": "completed",
    },
    "custom_tool_call": {
        "id": "ctc_1",
        "type": "custom_tool_call",
        "call_id": "call_2",
        "name": "sql",
        "input": "SELECT 1",
    },
    "computer_call": {
        "id": "cu_1",
        "type": "computer_call",
        "call_id": "call_3",
        "action": {"type": "click", "button": "left", "x": 10, "y": 20},
        "pending_safety_checks": [],
        "status": "completed",
    },
    "local_shell_call": {
        "id": "ls_1",
        "type": "local_shell_call",
        "call_id": "call_4",
        "action": {"type": "exec", "command": ["ls", "-l"], "env": {"A": "1"}},
        "status": "completed",
    },
    "shell_call": {
        "id": "sh_1",
        "type": "shell_call",
        "call_id": "call_5",
        "action": {"commands": ["pwd"]},
        "status": "completed",
    },
    "apply_patch_call": {
        "id": "ap_1",
        "type": "apply_patch_call",
        "call_id": "call_6",
        "operation": {"type": "update_file", "path": "a.txt", "diff": "@@ -1 +1 @@\n-a\n+b\n"},
        "status": "completed",
    },
    "mcp_approval_request": {
        "id": "mcpr_1",
        "type": "mcp_approval_request",
        "arguments": '{"path":"/tmp"}',
        "name": "delete",
        "server_label": "fs",
    },
    "web_search_call": {
        "id": "ws_1",
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "weather Paris"},
    },
    "file_search_call": {
        "id": "fs_1",
        "type": "file_search_call",
        "queries": ["refund policy"],
        "status": "completed",
        "results": [{"file_id": "file_1", "filename": "policy.pdf", "score": 0.87, "text": "Refunds within 30 days."}],
    },
    "code_interpreter_call": {
        "id": "ci_1",
        "type": "code_interpreter_call",
        "code": "print(1+1)",
        "container_id": "cntr_1",
        "outputs": [{"type": "logs", "logs": "2"}],
        "status": "completed",
    },
    "image_generation_call": {"id": "ig_1", "type": "image_generation_call", "result": PNG, "status": "completed"},
    "mcp_call": {
        "id": "mcp_1",
        "type": "mcp_call",
        "arguments": '{"q":"x"}',
        "name": "search",
        "server_label": "docs",
        "output": "found",
    },
    "mcp_list_tools": {
        "id": "mcpl_1",
        "type": "mcp_list_tools",
        "server_label": "docs",
        "tools": [{"name": "search", "input_schema": {"type": "object"}, "description": "Search the docs"}],
    },
}

# What the runner writes back for the client-side calls above, and the user's own input.
RUNNER_ITEMS: dict[str, dict[str, Any]] = {
    "user_text": {"role": "user", "content": "What's the weather?"},
    "user_image": {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": SCREENSHOT, "detail": "auto"},
        ],
    },
    "user_file": {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_file", "file_data": PNG, "filename": "a.png"}],
    },
    "developer": {"role": "developer", "content": "Answer briefly."},
    "function_call_output": {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    "function_call_output_parts": {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_text", "text": "chart:"}, {"type": "input_image", "image_url": SCREENSHOT}],
    },
    "custom_tool_call_output": {"type": "custom_tool_call_output", "call_id": "call_2", "output": "1"},
    "computer_call_output": {
        "type": "computer_call_output",
        "call_id": "call_3",
        "output": {"type": "computer_screenshot", "image_url": SCREENSHOT},
    },
    "local_shell_call_output": {"type": "local_shell_call_output", "call_id": "call_4", "output": "total 0"},
    "shell_call_output": {
        "type": "shell_call_output",
        "call_id": "call_5",
        "output": [{"stdout": "/home", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    "apply_patch_call_output": {
        "type": "apply_patch_call_output",
        "call_id": "call_6",
        "status": "completed",
        "output": "patched",
    },
    "mcp_approval_response": {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": True,
        "reason": "ok",
    },
    "unknown": {"type": "future_item_kind", "id": "fut_1", "payload": {"nested": [1, 2.5, None, True]}},
}


def model_items() -> dict[str, dict[str, Any]]:
    """Each model output item as the SDK replays it as input (``to_input_items``)."""
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)
    outputs = [adapter.validate_python(raw) for raw in MODEL_OUTPUT.values()]
    items = ModelResponse(output=outputs, usage=Usage(), response_id=None).to_input_items()
    return dict(zip(MODEL_OUTPUT, [dict(i) for i in items], strict=True))


def all_items() -> dict[str, dict[str, Any]]:
    return {**model_items(), **RUNNER_ITEMS}


def conversation_items() -> list[dict[str, Any]]:
    """Every example in an order a session could hold: each call before its output."""
    model, runner = model_items(), RUNNER_ITEMS
    return [
        runner["developer"],
        runner["user_text"],
        runner["user_image"],
        runner["user_file"],
        model["reasoning"],
        model["message"],
        model["function_call"],
        runner["function_call_output"],
        model["custom_tool_call"],
        runner["custom_tool_call_output"],
        model["computer_call"],
        runner["computer_call_output"],
        model["local_shell_call"],
        runner["local_shell_call_output"],
        model["shell_call"],
        runner["shell_call_output"],
        model["apply_patch_call"],
        runner["apply_patch_call_output"],
        model["mcp_approval_request"],
        runner["mcp_approval_response"],
        model["web_search_call"],
        model["file_search_call"],
        model["code_interpreter_call"],
        model["image_generation_call"],
        model["mcp_call"],
        model["mcp_list_tools"],
        runner["unknown"],
    ]
