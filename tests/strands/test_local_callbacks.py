"""Callbacks whose work reads and writes no store run on the caller's thread, without a hop to a worker.

A Strands turn makes six callbacks that may reach the ledger. Four of them usually do
not (the model call's first note when ``agent.messages`` did not move, its last note when
besides no contextledger manager plans on it and no other ledger callback hears it, its
end when no contextledger manager reacts, the final answer left to the invocation's end):
they run at once, and the ledger records exactly what it recorded with every callback on
a worker. The managers here are opened with ``inline=False``, so the callbacks that do
commit go to a worker and can be counted (the inline commits are ``test_inline.py``'s).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from strands.agent.conversation_manager import SlidingWindowConversationManager

from contextledger.core.hooks import BeforeModelCallEvent
from contextledger.errors import LedgerClosed
from contextledger.integrations.strands import LedgerSessionManager, StrandsConversationManager
from contextledger.integrations.strands.scripted import CallTool, Reply
from contextledger.ledger import Ledger
from contextledger.managers import SlidingWindowConversationManager as LedgerSlidingWindow
from tests.strands.scenarios import build_agent, model_of


def _turns(agent: Any, steps: list[list[Any]]) -> None:
    async def main() -> None:
        for n, script in enumerate(steps):
            model_of(agent).extend(script)
            await agent.invoke_async(f"question {n}")

    asyncio.run(main())


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_a_plain_turn_hands_two_callbacks_to_a_worker(url: str, tmp_path: Any, hops: list[str]) -> None:
    ledger = Ledger.connect(url if url != "sqlite" else f"sqlite:///{tmp_path}/local.db")
    manager = LedgerSessionManager("s", ledger=ledger, inline=False)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    hops.clear()  # the agent's initialization
    _turns(agent, [[Reply(f"answer {n}")] for n in range(4)])
    # Per turn: the prompt's commit and the end of the invocation (the model call's count
    # rides with the latter).
    assert len(hops) == 2 * 4
    conversation = manager.conversation(agent.agent_id)
    assert [e.entry_id for e in conversation.view] == [m["tracking_id"] for m in agent.messages]
    assert [e.message.to_strands()["content"] for e in conversation.view] == [m["content"] for m in agent.messages]
    assert conversation.state.model_call_count == 4
    restored = Ledger(ledger.store).conversation("s", agent.agent_id)
    assert restored.view.ids == conversation.view.ids
    ledger.close()


def test_a_tool_turn_keeps_every_message_that_reaches_the_store_on_a_worker(hops: list[str]) -> None:
    ledger = Ledger.connect("memory://")
    manager = LedgerSessionManager("s", ledger=ledger, inline=False)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    hops.clear()
    _turns(agent, [[CallTool("lookup", {"key": "alpha"}, "tu-1"), Reply("alpha found")]])
    # The prompt, the toolUse and the toolResult are committed as they come and the
    # invocation's end goes to a worker; the rest runs at once.
    assert len(hops) == 3 + 1
    conversation = manager.conversation(agent.agent_id)
    assert [e.entry_id for e in conversation.view] == [m["tracking_id"] for m in agent.messages]
    assert conversation.state.model_call_count == 2


def test_a_contextledger_manager_still_hears_the_end_of_each_model_call_on_a_worker(hops: list[str]) -> None:
    ledger = Ledger.connect("memory://")
    manager = LedgerSessionManager("s", ledger=ledger, inline=False)
    agent = build_agent(manager, StrandsConversationManager(LedgerSlidingWindow(window_size=40)))
    hops.clear()
    _turns(agent, [[Reply("answer")]])
    assert "<lambda>" in hops
    # The model call's last note (the ledger's manager plans on it) and its end (the
    # manager reacts to it) too.
    assert len(hops) == 4
    assert manager.conversation(agent.agent_id).state.model_call_count == 1


def test_a_ledger_callback_on_the_model_call_keeps_its_last_note_on_a_worker(hops: list[str]) -> None:
    ledger = Ledger.connect("memory://")
    manager = LedgerSessionManager("s", ledger=ledger, inline=False)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    heard: list[bool] = []  # whether each call ran on the agent's event loop thread

    def on_call(_event: BeforeModelCallEvent) -> None:
        heard.append(threading.get_ident() == loop_thread[0])

    manager.conversation(agent.agent_id).hooks.add_callback(BeforeModelCallEvent, on_call)
    loop_thread: list[int] = []
    hops.clear()

    async def main() -> None:
        loop_thread.append(threading.get_ident())
        for n in range(3):
            model_of(agent).extend([Reply(f"answer {n}")])
            await agent.invoke_async(f"question {n}")

    asyncio.run(main())
    # A callback the binding does not know may write: the note goes to a worker, as before.
    assert heard == [False, False, False]
    assert len(hops) == 3 * 3
    assert manager.conversation(agent.agent_id).state.model_call_count == 3


def test_the_last_note_runs_at_once_only_when_nothing_moved_and_no_manager_plans() -> None:
    ledger = Ledger.connect("memory://")
    manager = LedgerSessionManager("s", ledger=ledger, inline=False)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    _turns(agent, [[Reply("answer")]])
    binding = manager.binding(agent.agent_id)
    assert binding.counts_locally(agent)
    agent.messages[:] = agent.messages[2:]  # what a Strands manager's trim does: the list moved
    assert not binding.counts_locally(agent)

    adapted = LedgerSessionManager("s2", ledger=ledger, inline=False)
    other = build_agent(adapted, StrandsConversationManager(LedgerSlidingWindow(window_size=40)))
    _turns(other, [[Reply("answer")]])
    assert not adapted.binding(other.agent_id).counts_locally(other)  # the ledger's manager plans on the call
    ledger.close()


def test_a_closed_manager_refuses_even_a_callback_that_needs_no_store(tmp_path: Any) -> None:
    manager = LedgerSessionManager("s", url=f"sqlite:///{tmp_path}/closed.db")  # owns its ledger
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    _turns(agent, [[Reply("answer")]])
    manager.close()
    model_of(agent).extend([Reply("again")])
    with pytest.raises(LedgerClosed):
        asyncio.run(agent.invoke_async("after close"))
