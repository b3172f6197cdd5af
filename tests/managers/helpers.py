"""Builders for conversations and a scripted model-call cycle shared by the manager tests."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from contextledger import Conversation, Message
from contextledger.errors import ContextWindowOverflowError
from contextledger.stores.capabilities import CompleteStore

BACKENDS = ["memory", "sqlite", "postgres", "redis", "redis_cluster"]


def backend_store(request: pytest.FixtureRequest, backend: str) -> CompleteStore:
    """The ``<backend>_store`` fixture of the backend plugins."""
    store: CompleteStore = request.getfixturevalue(f"{backend}_store")
    return store


def chat(count: int, prefix: str = "m") -> list[Message]:
    """``count`` alternating user/assistant text messages."""
    return [
        Message.user(f"{prefix}{i}. Question number {i}.")
        if i % 2 == 0
        else Message.assistant(f"{prefix}{i}. Answer number {i}.")
        for i in range(count)
    ]


def tool_turn(tag: str, result: str = "ok", *, calls: int = 1) -> list[Message]:
    """A user turn with ``calls`` tool round trips and a final answer."""
    out = [Message.user(f"Please do {tag}.")]
    for k in range(calls):
        tid = f"{tag}-t{k}"
        out.append(Message.tool_use(tid, "lookup", {"q": tag, "k": k}))
        out.append(Message.tool_result(tid, result))
    out.append(Message.assistant(f"Done with {tag}."))
    return out


def overflow() -> ContextWindowOverflowError:
    """A context-window overflow as a host reports it."""
    return ContextWindowOverflowError("input is too long for the model's context window")


def model_call(
    conv: Conversation,
    *,
    error: BaseException | None = None,
    limit: int | None = None,
    projected: int | None = None,
) -> bool:
    """One scripted model call: before, then after (with ``error``); returns whether to retry."""
    conv.before_model_call(context_window_limit=limit, projected_input_tokens=projected)
    return conv.after_model_call(error)


def ids(messages: Iterable[Message]) -> list[str]:
    """Message ids in order."""
    return [m.message_id for m in messages]


def view_ids(conv: Conversation) -> list[str]:
    """Entry ids of the active view."""
    return [e.entry_id for e in conv.view]


def triggers(store: CompleteStore, session_id: str, agent_id: str = "default") -> list[str]:
    """Triggers of the committed reductions, in order."""
    return [r.trigger for r in store.reductions(session_id, agent_id)]


def assert_valid_view(conv: Conversation) -> None:
    """The tool-pair invariants of the active view."""
    view = conv.view
    if len(view):
        assert not view[0].message.tool_result_ids, "the view starts with a toolResult"
    assert view.dangling_tool_uses() == [], "a toolUse lost its result"
    assert view.orphan_results() == [], "a toolResult lost its toolUse"
