"""A workload turn as LangChain messages (``langchain_core`` only), for both LangChain contenders."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from _protocol import text_of, tool_result, tool_use, turn


def messages_of(session: str, n: int) -> list[Any]:
    """Turn ``n`` as LangChain messages."""
    user, call, result, answer = turn(session, n)
    use, res = tool_use(call), tool_result(result)
    assert use is not None and res is not None
    return [
        HumanMessage(content=text_of(user)),
        AIMessage(content="", tool_calls=[{"name": use["name"], "args": use["input"], "id": use["toolUseId"]}]),
        ToolMessage(content=res["content"][0]["text"], tool_call_id=res["toolUseId"]),
        AIMessage(content=text_of(answer)),
    ]
