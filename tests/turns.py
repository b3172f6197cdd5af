"""Turns of messages several test modules append."""

from __future__ import annotations

from contextledger import Message


def paired_tool_turn() -> list[Message]:
    """A user's question, a tool call, its result and the answer: the common 4-message turn, fresh ids."""
    return [
        Message.user("q"),
        Message.tool_use("t1", "lookup", {"query": "x"}),
        Message.tool_result("t1", "r"),
        Message.assistant("a"),
    ]
