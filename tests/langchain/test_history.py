"""``LedgerChatMessageHistory``: LangChain's chat history interface on the ledger (sync and async)."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory

from contextledger import Ledger
from contextledger.aio import AsyncLedger
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.langchain import LedgerChatMessageHistory, ScriptedChatModel
from contextledger.integrations.langchain.convert import from_ledger
from contextledger.managers import TurnWindowConversationManager
from contextledger.model.pending import raw_fields
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore

TURN = [
    HumanMessage("Where is A-1?"),
    AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order": "A-1"}, "id": "c1"}]),
    ToolMessage(content="shipped", tool_call_id="c1"),
    AIMessage(content="It shipped.", response_metadata={"model_name": "m"}),
]


@pytest.fixture(autouse=True)
def _deprecation() -> Iterator[None]:
    # LangChain marks BaseChatMessageHistory and RunnableWithMessageHistory deprecated; these tests use them on purpose.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        yield


def test_it_is_a_chat_message_history_that_keeps_every_message(store: CompleteStore) -> None:
    ledger = Ledger(store)
    history = LedgerChatMessageHistory("chat-1", ledger=ledger)
    assert isinstance(history, BaseChatMessageHistory)
    history.add_messages(TURN)
    again = LedgerChatMessageHistory("chat-1", ledger=Ledger(store))
    restored = again.messages
    # Messages without an id get one in the ledger; the restored message says None, as it was given.
    assert restored == TURN
    assert len({h.message.message_id for h in ledger.history("chat-1")}) == 4


def test_clear_is_a_recorded_reduction_and_the_history_stays(store: CompleteStore) -> None:
    ledger = Ledger(store)
    history = LedgerChatMessageHistory("chat-2", ledger=ledger)
    history.add_messages(TURN)
    history.clear()
    assert history.messages == []
    (reduction,) = ledger.reductions("chat-2")
    assert (reduction.strategy, reduction.trigger, len(reduction.evicted)) == ("clear", "manual", 4)
    assert len(ledger.history("chat-2")) == 4
    history.clear()  # nothing left: nothing recorded
    assert len(ledger.reductions("chat-2")) == 1


def test_a_manager_keeps_the_window_after_each_add() -> None:
    ledger = Ledger(MemoryStore())
    history = LedgerChatMessageHistory("chat-3", ledger=ledger, manager=TurnWindowConversationManager(max_user_turns=1))
    history.add_messages(TURN)
    history.add_messages([HumanMessage("And B-2?"), AIMessage("Also shipped.")])
    assert [m.content for m in history.messages] == ["And B-2?", "Also shipped."]
    assert {e.trigger for e in ledger.evictions("chat-3")} == {"end_of_invocation"}


def test_nothing_is_stored_when_one_message_is_invalid() -> None:
    ledger = Ledger(MemoryStore())
    history = LedgerChatMessageHistory("chat-4", ledger=ledger)
    with pytest.raises(InvalidMessage, match="message 1"):
        history.add_messages([HumanMessage("ok"), HumanMessage("bad", additional_kwargs={"t": (1,)})])
    assert history.messages == []


def test_async_methods_on_a_ledger_and_on_an_async_ledger(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"

    async def on_async_ledger() -> list[BaseMessage]:
        async with await AsyncLedger.connect(url) as ledger:
            history = LedgerChatMessageHistory("chat-5", ledger=ledger)
            await history.aadd_messages(TURN[:2])
            await history.aadd_messages(TURN[2:])
            with pytest.raises(ConfigurationError, match="AsyncLedger"):
                _ = history.messages
            return list(await history.aget_messages())

    assert asyncio.run(on_async_ledger()) == TURN

    async def on_ledger() -> tuple[list[BaseMessage], list[BaseMessage]]:
        with Ledger.connect(url) as ledger:
            history = LedgerChatMessageHistory("chat-5", ledger=ledger)
            before = list(await history.aget_messages())
            await history.aclear()
            return before, list(await history.aget_messages())

    before, after = asyncio.run(on_ledger())
    assert before == TURN
    assert after == []


def test_runnable_with_message_history_remembers_across_objects(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    model = ScriptedChatModel(script=["Hello Ada.", "Your name is Ada."])
    with Ledger.connect(url) as ledger:
        chain = RunnableWithMessageHistory(
            model, lambda session_id: LedgerChatMessageHistory(session_id, ledger=ledger)
        )
        config: RunnableConfig = {"configurable": {"session_id": "ada"}}
        chain.invoke([HumanMessage("I am Ada.")], config=config)
    with Ledger.connect(url) as ledger:
        chain = RunnableWithMessageHistory(
            model, lambda session_id: LedgerChatMessageHistory(session_id, ledger=ledger)
        )
        chain.invoke([HumanMessage("What is my name?")], config={"configurable": {"session_id": "ada"}})
        # The second call was given the first exchange from the ledger.
        assert [m.content for m in model.received[1]] == ["I am Ada.", "Hello Ada.", "What is my name?"]
        assert len(ledger.history("ada")) == 4


def test_it_refuses_what_is_not_a_ledger() -> None:
    with pytest.raises(ConfigurationError, match="Ledger"):
        LedgerChatMessageHistory("x", ledger="sqlite:///x.db")  # type: ignore[arg-type]


def test_a_restored_history_is_rendered_without_decoding_the_stored_text(tmp_path: Path) -> None:
    # Each kept message is checked against the blocks parsed from its stored text, not
    # decoded into the message: a restore leaves no decoded blocks alive.
    url = f"sqlite:///{tmp_path}/chat.db"
    with Ledger.connect(url) as ledger:
        LedgerChatMessageHistory("chat-r", ledger=ledger).add_messages(TURN)
    with Ledger.connect(url) as ledger:
        assert LedgerChatMessageHistory("chat-r", ledger=ledger).messages == TURN
        messages = [e.message for e in ledger.conversation("chat-r", "default").view]
        assert [from_ledger(m) for m in messages] == TURN
        assert not any("content" in raw_fields(m) for m in messages)  # each still holds its stored text
