"""Hypothesis strategies for LangChain messages of every kind an agent holds."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call

text = st.text(max_size=20)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=3)
parts = st.one_of(
    text,
    st.builds(lambda t: {"type": "text", "text": t}, text),
    st.builds(lambda url: {"type": "image_url", "image_url": {"url": url}}, text),
    st.builds(lambda u, i: {"type": "tool_use", "id": i, "name": "f", "input": u}, json_objects, ids),
    st.builds(lambda t, s: {"type": "reasoning", "reasoning": t, "extras": s}, text, json_objects),
)
contents: st.SearchStrategy[Any] = text | st.lists(parts, max_size=3)
optional_ids = st.none() | ids
common = {
    "content": contents,
    "additional_kwargs": json_objects,
    "response_metadata": json_objects,
    "id": optional_ids,
    "name": st.none() | text,
}
tool_calls = st.lists(st.builds(lambda n, a, i: tool_call(name=n, args=a, id=i), ids, json_objects, ids), max_size=2)
usage = st.none() | st.builds(
    lambda i, o: {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
invalid_calls = st.lists(
    st.builds(lambda n, a, i: invalid_tool_call(name=n, args=a, id=i, error="bad json"), ids, text, ids), max_size=1
)

messages: st.SearchStrategy[BaseMessage] = st.one_of(
    st.builds(HumanMessage, **common),
    st.builds(SystemMessage, **common),
    st.builds(AIMessage, **common, tool_calls=tool_calls, invalid_tool_calls=invalid_calls, usage_metadata=usage),
    st.builds(AIMessageChunk, **common, usage_metadata=usage),
    st.builds(
        ToolMessage,
        **common,
        tool_call_id=ids,
        artifact=json_values,
        status=st.sampled_from(["success", "error"]),
    ),
    st.builds(ChatMessage, **common, role=st.sampled_from(["user", "assistant", "system", "critic", "developer"])),
    st.builds(FunctionMessage, content=contents, name=ids, id=optional_ids),
)
