"""Callbacks whose work reads and writes no store run on the caller's thread, without a hop to a worker.

A Strands turn makes six callbacks that may reach the ledger. Three of them usually do
not (the model call's first note when ``agent.messages`` did not move, its end when no
contextledger manager reacts, the final answer left to the invocation's end): they run
at once, and the ledger records exactly what it recorded with every callback on a worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from strands.agent.conversation_manager import SlidingWindowConversationManager

from contextledger.aio.runner import Runner
from contextledger.errors import LedgerClosed
from contextledger.integrations.strands import LedgerSessionManager, StrandsConversationManager
from contextledger.integrations.strands.scripted import CallTool, Reply
from contextledger.ledger import Ledger
from contextledger.managers import SlidingWindowConversationManager as LedgerSlidingWindow
from tests.strands.scenarios import build_agent, model_of


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every callback's work handed to a worker thread, in order."""
    handed: list[str] = []
    run = Runner.run

    async def counted(self: Runner, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(fn, "__name__", repr(fn)))
        return await run(self, fn, *args, **kwargs)

    monkeypatch.setattr(Runner, "run", counted)
    return handed


def _turns(agent: Any, steps: list[list[Any]]) -> None:
    async def main() -> None:
        for n, script in enumerate(steps):
            model_of(agent).extend(script)
            await agent.invoke_async(f"question {n}")

    asyncio.run(main())


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_plain_turn_hands_three_callbacks_to_a_worker(url: str, tmp_path: Any, hops: list[str]) -> None:
    ledger = Ledger.connect(url if url != "sqlite" else f"sqlite:///{tmp_path}/local.db")
    manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    hops.clear()  # the agent's initialization
    _turns(agent, [[Reply(f"answer {n}")] for n in range(4)])
    # Per turn: the prompt's commit, the model call's last note, the end of the invocation.
    assert len(hops) == 3 * 4
    conversation = manager.conversation(agent.agent_id)
    assert [e.entry_id for e in conversation.view] == [m["tracking_id"] for m in agent.messages]
    assert [e.message.to_strands()["content"] for e in conversation.view] == [m["content"] for m in agent.messages]
    assert conversation.state.model_call_count == 4
    restored = Ledger(ledger.store).conversation("s", agent.agent_id)
    assert restored.view.ids == conversation.view.ids
    ledger.close()


def test_a_tool_turn_keeps_every_message_that_reaches_the_store_on_a_worker(hops: list[str]) -> None:
    ledger = Ledger.connect("memory://")
    manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    hops.clear()
    _turns(agent, [[CallTool("lookup", {"key": "alpha"}, "tu-1"), Reply("alpha found")]])
    # The prompt, the toolUse and the toolResult are committed as they come, each model
    # call's last note and the invocation's end go to a worker; the rest runs at once.
    assert len(hops) == 3 + 2 + 1
    conversation = manager.conversation(agent.agent_id)
    assert [e.entry_id for e in conversation.view] == [m["tracking_id"] for m in agent.messages]
    assert conversation.state.model_call_count == 2


def test_a_contextledger_manager_still_hears_the_end_of_each_model_call_on_a_worker(hops: list[str]) -> None:
    ledger = Ledger.connect("memory://")
    manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(manager, StrandsConversationManager(LedgerSlidingWindow(window_size=40)))
    hops.clear()
    _turns(agent, [[Reply("answer")]])
    assert "<lambda>" in hops
    assert len(hops) == 4  # the end of the model call too: the ledger's manager reacts to it
    assert manager.conversation(agent.agent_id).state.model_call_count == 1


def test_a_closed_manager_refuses_even_a_callback_that_needs_no_store(tmp_path: Any) -> None:
    manager = LedgerSessionManager("s", url=f"sqlite:///{tmp_path}/closed.db")  # owns its ledger
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    _turns(agent, [[Reply("answer")]])
    manager.close()
    model_of(agent).extend([Reply("again")])
    with pytest.raises(LedgerClosed):
        asyncio.run(agent.invoke_async("after close"))
