"""Strands edges the README promises: the view rules under odd tool ids, and an overflow that cannot be reduced."""

from __future__ import annotations

from typing import Any

import pytest
from strands import Agent
from strands.types.exceptions import ContextWindowOverflowException

from contextledger import Conversation, Message, ReductionFailed, SlidingWindowConversationManager
from contextledger.core.view import is_turn_opener_violation
from contextledger.errors import ContextWindowOverflowError
from contextledger.integrations.strands import (
    LedgerSessionManager,
    Overflow,
    ScriptedModel,
    StrandsConversationManager,
    StrandsReductionFailed,
    scripted,
)
from contextledger.ledger import Ledger
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore

MISMATCHED: list[Any] = [
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "use-1", "name": "lookup", "input": {}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "other-2", "status": "success", "content": []}}]},
]


def opens_badly(conversation: Conversation) -> bool:
    view = conversation.view
    return bool(len(view)) and is_turn_opener_violation(view[0])


def test_a_window_of_one_never_opens_the_view_with_a_mismatched_result() -> None:
    conversation = Conversation(MemoryStore(), "s", manager=SlidingWindowConversationManager(window_size=1))
    conversation.append(Message.tool_use("use-1", "lookup", {}), Message.tool_result("other-2", "r"))
    before = [e.entry_id for e in conversation.view]
    assert conversation.reduce("per_turn") is None  # best-effort: nothing it may do
    assert [e.entry_id for e in conversation.view] == before
    with pytest.raises(ReductionFailed):
        conversation.after_model_call(ContextWindowOverflowError("too long"))
    assert [e.entry_id for e in conversation.view] == before


@pytest.mark.parametrize("window", [1, 2])
def test_every_reduction_of_a_mismatched_pair_keeps_a_valid_opening(window: int) -> None:
    conversation = Conversation(MemoryStore(), "s", manager=SlidingWindowConversationManager(window_size=window))
    conversation.append(
        Message.user("go"),
        Message.assistant("checking"),
        Message.tool_result("nobody", "orphan"),
        Message.tool_use("use-1", "lookup", {}),
        Message.tool_result("other-2", "r"),
    )
    conversation.reduce("per_turn")
    assert not opens_badly(conversation) or conversation.view[0].message.plain_text == "go"


def test_in_a_strands_agent_an_overflow_nothing_can_reduce_raises_strands_reduction_failed(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lenient provider: it takes a conversation that opens with a tool call, as some do.
    monkeypatch.setattr(scripted, "validate_converse", lambda *_args, **_kwargs: None)
    ledger = Ledger(store)
    agent = Agent(
        model=ScriptedModel([Overflow()]),
        callback_handler=None,
        session_manager=LedgerSessionManager("s", ledger=ledger),
        conversation_manager=StrandsConversationManager(SlidingWindowConversationManager(window_size=1, per_turn=True)),
    )
    agent.messages.extend(MISMATCHED)
    with pytest.raises(StrandsReductionFailed) as raised:
        agent()  # the agent continues from its messages: the overflow cannot be reduced
    assert isinstance(raised.value, ContextWindowOverflowException)
    assert isinstance(raised.value, ReductionFailed)
    view = ledger.conversation("s").view
    assert [e.message.tool_use_ids or e.message.tool_result_ids for e in view] == [["use-1"], ["other-2"]]
    assert not any(r.trigger == "reactive" for r in ledger.reductions("s"))


def test_in_a_strands_agent_an_overflow_of_a_single_prompt_raises_strands_reduction_failed(
    store: CompleteStore,
) -> None:
    ledger = Ledger(store)
    agent = Agent(
        model=ScriptedModel([Overflow()]),
        callback_handler=None,
        session_manager=LedgerSessionManager("s", ledger=ledger),
        conversation_manager=StrandsConversationManager(SlidingWindowConversationManager(window_size=1)),
    )
    with pytest.raises(StrandsReductionFailed, match="nothing left to reduce"):
        agent("A prompt far too long for the model.")
    assert [e.message.plain_text for e in ledger.conversation("s").view] == ["A prompt far too long for the model."]
