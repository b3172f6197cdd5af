"""A workload turn as Pydantic AI messages (``pydantic_ai`` only), for both Pydantic AI contenders."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.usage import RequestUsage

from _protocol import text_of, tool_result, tool_use, turn

AT = datetime(2025, 1, 1, tzinfo=UTC)


def messages_of(session: str, n: int) -> list[Any]:
    """Turn ``n`` as the four messages an agent run with one tool call adds (``result.new_messages()``)."""
    user, call, result, answer = turn(session, n)
    use, res = tool_use(call), tool_result(result)
    assert use is not None and res is not None
    run = f"run-{n}"
    usage = RequestUsage(input_tokens=100 + n, output_tokens=20)
    return [
        ModelRequest(parts=[UserPromptPart(text_of(user), timestamp=AT)], timestamp=AT, run_id=run),
        ModelResponse(
            parts=[ToolCallPart(use["name"], use["input"], tool_call_id=use["toolUseId"])],
            usage=usage,
            model_name="bench",
            timestamp=AT,
            run_id=run,
        ),
        ModelRequest(
            parts=[ToolReturnPart(use["name"], res["content"][0]["text"], tool_call_id=res["toolUseId"], timestamp=AT)],
            timestamp=AT,
            run_id=run,
        ),
        ModelResponse(parts=[TextPart(text_of(answer))], usage=usage, model_name="bench", timestamp=AT, run_id=run),
    ]
