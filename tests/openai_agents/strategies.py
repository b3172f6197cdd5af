"""Hypothesis strategies for Responses input items of every type the Agents SDK produces.

Each item is built from its required fields (shapes from the installed ``openai`` types)
plus a few arbitrary extra JSON fields, so fields this library does not know must survive
too.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

KNOWN_TYPES = {
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "computer_call",
    "computer_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
    "mcp_list_tools",
    "reasoning",
    "image_generation_call",
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "tool_search_call",
    "tool_search_output",
    "compaction",
    "compaction_trigger",
    "item_reference",
    "additional_tools",
    "program",
    "program_output",
}

text = st.text(max_size=30)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)
json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=3)
extras = st.dictionaries(
    st.text(alphabet="xyz_", min_size=1, max_size=6).map(lambda k: f"x_{k}"), json_values, max_size=2
)
statuses = st.sampled_from(["in_progress", "completed", "incomplete"])
payloads = st.binary(max_size=24)
b64 = payloads.map(lambda b: base64.b64encode(b).decode("ascii"))


@st.composite
def data_urls(draw: st.DrawFn) -> str:
    mime = draw(st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml"]))
    return f"data:{mime};base64,{draw(b64)}"


image_urls = data_urls() | st.just("https://example.com/cat.png") | st.just("data:image/png;base64,not base64!")


def with_extras(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """``base`` plus up to two unknown fields."""
    return st.builds(lambda b, x: {**x, **b}, base, extras)


def fixed(required: dict[str, Any], optional: dict[str, Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    return with_extras(st.fixed_dictionaries(required, optional=optional or {}))


# -- message content parts -----------------------------------------------------------------

input_text = fixed({"type": st.just("input_text"), "text": text})
output_text = fixed(
    {"type": st.just("output_text"), "text": text, "annotations": st.lists(json_objects, max_size=2)},
    {"logprobs": st.lists(json_objects, max_size=1)},
)
refusal = fixed({"type": st.just("refusal"), "refusal": text})
input_image = st.one_of(
    fixed(
        {"type": st.just("input_image"), "image_url": image_urls}, {"detail": st.sampled_from(["auto", "low", "high"])}
    ),
    fixed({"type": st.just("input_image"), "file_id": ids}, {"detail": st.just("auto")}),
)
input_file = st.one_of(
    fixed({"type": st.just("input_file"), "file_data": b64}, {"filename": text}),
    fixed({"type": st.just("input_file"), "file_data": b64.map(lambda d: f"data:application/pdf;base64,{d}")}),
    fixed({"type": st.just("input_file"), "file_data": st.sampled_from(["data:", "data:x", "data:,", "not base64"])}),
    fixed({"type": st.just("input_file"), "file_url": st.just("https://example.com/a.pdf")}),
    fixed({"type": st.just("input_file"), "file_id": ids}),
    fixed({"type": st.just("input_file")}),
)
input_audio = fixed(
    {
        "type": st.just("input_audio"),
        "input_audio": st.fixed_dictionaries({"data": b64 | text, "format": st.sampled_from(["wav", "mp3"])}),
    }
)
unknown_part = with_extras(st.fixed_dictionaries({"type": ids.map(lambda t: f"part_{t}")}))
input_parts = input_text | input_image | input_file | input_audio | unknown_part | json_scalars
output_parts = output_text | refusal | unknown_part

# -- items ---------------------------------------------------------------------------------

easy_message = fixed(
    {
        "role": st.sampled_from(["user", "assistant", "system", "developer"]),
        "content": text | st.lists(input_parts, max_size=3),
    },
    {"type": st.just("message"), "phase": st.sampled_from(["commentary", "final_answer"])},
)
input_message = fixed(
    {
        "type": st.just("message"),
        "role": st.sampled_from(["user", "system", "developer"]),
        "content": st.lists(input_parts, max_size=3),
    },
    {"status": statuses},
)
output_message = fixed(
    {
        "id": ids,
        "type": st.just("message"),
        "role": st.just("assistant"),
        "status": statuses,
        "content": st.lists(output_parts, max_size=3),
    }
)
arguments = json_objects.map(json.dumps) | text
function_call = fixed(
    {"type": st.just("function_call"), "call_id": ids, "name": ids, "arguments": arguments},
    {"id": ids, "status": statuses, "namespace": ids},
)
function_call_output = fixed(
    {
        "type": st.just("function_call_output"),
        "call_id": ids,
        "output": text | st.lists(input_text | input_image | input_file, max_size=3),
    },
    {"id": ids, "status": statuses},
)
custom_tool_call = fixed({"type": st.just("custom_tool_call"), "call_id": ids, "name": ids, "input": text}, {"id": ids})
custom_tool_call_output = fixed(
    {
        "type": st.just("custom_tool_call_output"),
        "call_id": ids,
        "output": text | st.lists(input_text | input_image, max_size=2),
    }
)
computer_call = fixed(
    {
        "type": st.just("computer_call"),
        "id": ids,
        "call_id": ids,
        "action": st.fixed_dictionaries(
            {"type": st.just("click"), "x": st.integers(0, 999), "y": st.integers(0, 999), "button": st.just("left")}
        ),
        "pending_safety_checks": st.lists(json_objects, max_size=1),
        "status": statuses,
    }
)
screenshot = st.one_of(
    st.fixed_dictionaries({"type": st.just("computer_screenshot"), "image_url": image_urls}),
    st.fixed_dictionaries({"type": st.just("computer_screenshot"), "file_id": ids}),
)
computer_call_output = fixed(
    {"type": st.just("computer_call_output"), "call_id": ids, "output": screenshot},
    {"id": ids, "acknowledged_safety_checks": st.lists(json_objects, max_size=1)},
)
shell_action = st.fixed_dictionaries(
    {
        "type": st.just("exec"),
        "command": st.lists(text, min_size=1, max_size=3),
        "env": st.dictionaries(ids, text, max_size=2),
    }
)
local_shell_call = fixed(
    {"type": st.just("local_shell_call"), "id": ids, "call_id": ids, "action": shell_action, "status": statuses}
)
local_shell_call_output = st.one_of(
    fixed({"type": st.just("local_shell_call_output"), "call_id": ids, "output": text}),  # as the SDK writes it
    fixed(
        {"type": st.just("local_shell_call_output"), "id": ids, "output": text}, {"status": statuses}
    ),  # as the API types it
)
shell_call = fixed(
    {
        "type": st.just("shell_call"),
        "call_id": ids,
        "action": st.fixed_dictionaries({"commands": st.lists(text, max_size=2)}),
    },
    {"id": ids, "status": statuses},
)
shell_call_output = fixed(
    {
        "type": st.just("shell_call_output"),
        "call_id": ids,
        "output": st.lists(
            st.fixed_dictionaries(
                {
                    "stdout": text,
                    "stderr": text,
                    "outcome": st.fixed_dictionaries({"type": st.just("exit"), "exit_code": st.integers(0, 255)}),
                }
            ),
            max_size=2,
        ),
    }
)
apply_patch_call = fixed(
    {
        "type": st.just("apply_patch_call"),
        "call_id": ids,
        "status": st.sampled_from(["in_progress", "completed"]),
        "operation": st.fixed_dictionaries({"type": st.just("update_file"), "path": text, "diff": text}),
    }
)
apply_patch_call_output = fixed(
    {"type": st.just("apply_patch_call_output"), "call_id": ids, "status": st.sampled_from(["completed", "failed"])},
    {"output": text},
)
mcp_approval_request = fixed(
    {"type": st.just("mcp_approval_request"), "id": ids, "arguments": arguments, "name": ids, "server_label": ids}
)
mcp_approval_response = fixed(
    {"type": st.just("mcp_approval_response"), "approval_request_id": ids, "approve": st.booleans()},
    {"reason": text, "id": ids},
)
reasoning = fixed(
    {
        "type": st.just("reasoning"),
        "id": ids,
        "summary": st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": text}), max_size=2),
    },
    {
        "content": st.lists(st.fixed_dictionaries({"type": st.just("reasoning_text"), "text": text}), max_size=2),
        "encrypted_content": b64,
        "status": statuses,
    },
)
image_generation_call = fixed(
    {"type": st.just("image_generation_call"), "id": ids, "result": st.none() | b64 | text, "status": statuses}
)
web_search_call = fixed(
    {
        "type": st.just("web_search_call"),
        "id": ids,
        "status": statuses,
        "action": st.fixed_dictionaries({"type": st.just("search"), "query": text}),
    }
)
file_search_call = fixed(
    {"type": st.just("file_search_call"), "id": ids, "queries": st.lists(text, max_size=2), "status": statuses},
    {"results": st.none() | st.lists(json_objects, max_size=2)},
)
code_interpreter_call = fixed(
    {
        "type": st.just("code_interpreter_call"),
        "id": ids,
        "code": st.none() | text,
        "container_id": ids,
        "outputs": st.none() | st.lists(st.fixed_dictionaries({"type": st.just("logs"), "logs": text}), max_size=2),
        "status": statuses,
    }
)
mcp_call = fixed(
    {"type": st.just("mcp_call"), "id": ids, "arguments": arguments, "name": ids, "server_label": ids},
    {"output": st.none() | text, "error": st.none() | text},
)
mcp_list_tools = fixed(
    {"type": st.just("mcp_list_tools"), "id": ids, "server_label": ids, "tools": st.lists(json_objects, max_size=2)}
)
hosted_misc = st.one_of(
    fixed(
        {"type": st.just("tool_search_call"), "arguments": json_values},
        {"call_id": ids, "execution": st.sampled_from(["server", "client"])},
    ),
    fixed({"type": st.just("tool_search_output"), "tools": st.lists(json_objects, max_size=2)}, {"call_id": ids}),
    fixed({"type": st.just("compaction"), "encrypted_content": b64}, {"id": ids}),
    fixed({"type": st.just("compaction_trigger")}),
    fixed({"type": st.just("item_reference"), "id": ids}),
    fixed(
        {"type": st.just("additional_tools"), "role": st.just("developer"), "tools": st.lists(json_objects, max_size=2)}
    ),
    fixed({"type": st.just("program"), "id": ids, "call_id": ids, "code": text, "fingerprint": ids}),
    fixed({"type": st.just("program_output"), "id": ids, "call_id": ids, "result": text, "status": statuses}),
)
unknown_item = with_extras(
    st.fixed_dictionaries(
        {"type": ids.filter(lambda t: t not in KNOWN_TYPES)},
        optional={"role": st.sampled_from(["user", "assistant", "system", "tool"]), "payload": json_values},
    )
)

ITEM_STRATEGIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "easy_message": easy_message,
    "input_message": input_message,
    "output_message": output_message,
    "function_call": function_call,
    "function_call_output": function_call_output,
    "custom_tool_call": custom_tool_call,
    "custom_tool_call_output": custom_tool_call_output,
    "computer_call": computer_call,
    "computer_call_output": computer_call_output,
    "local_shell_call": local_shell_call,
    "local_shell_call_output": local_shell_call_output,
    "shell_call": shell_call,
    "shell_call_output": shell_call_output,
    "apply_patch_call": apply_patch_call,
    "apply_patch_call_output": apply_patch_call_output,
    "mcp_approval_request": mcp_approval_request,
    "mcp_approval_response": mcp_approval_response,
    "reasoning": reasoning,
    "image_generation_call": image_generation_call,
    "web_search_call": web_search_call,
    "file_search_call": file_search_call,
    "code_interpreter_call": code_interpreter_call,
    "mcp_call": mcp_call,
    "mcp_list_tools": mcp_list_tools,
    "hosted_misc": hosted_misc,
    "unknown": unknown_item,
}

any_item = st.one_of(*ITEM_STRATEGIES.values())

CALL_OUTPUT_STRATEGIES = [
    (function_call, function_call_output, "call_id", "call_id"),
    (custom_tool_call, custom_tool_call_output, "call_id", "call_id"),
    (computer_call, computer_call_output, "call_id", "call_id"),
    (local_shell_call, local_shell_call_output, "call_id", None),
    (shell_call, shell_call_output, "call_id", "call_id"),
    (apply_patch_call, apply_patch_call_output, "call_id", "call_id"),
    (mcp_approval_request, mcp_approval_response, "id", "approval_request_id"),
]


@st.composite
def tool_pairs(draw: st.DrawFn, call_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A call item and the output item answering it, both under ``call_id``."""
    call_s, output_s, call_key, output_key = draw(st.sampled_from(CALL_OUTPUT_STRATEGIES))
    call, output = dict(draw(call_s)), dict(draw(output_s))
    call[call_key] = call_id
    if output_key is None:  # local_shell_call_output: call_id as the SDK writes it, or id as typed
        output[("call_id" if "call_id" in output else "id")] = call_id
    else:
        output[output_key] = call_id
    return call, output
