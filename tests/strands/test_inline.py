"""The Strands session manager's commits inline: on the agent's own thread on SQLite and in-memory ledgers.

A plain Strands turn commits twice (the prompt; the answer with the end of the
invocation). With ``inline`` -- the default where the store commits without waiting on a
network -- both run on the thread of the agent's event loop, as the async API's inline
appends do; where one would wait, it committed nothing and runs on a worker. The ledger
records the same either way.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.types.content import Message as StrandsMessage

from contextledger.core.seam import WouldWait, run_inline
from contextledger.errors import ConfigurationError
from contextledger.integrations.strands import LedgerSessionManager
from contextledger.integrations.strands.scripted import CallTool, Reply
from contextledger.ledger import Ledger
from tests.aio.heartbeat import heartbeat
from tests.aio.test_runner import statement_threads
from tests.strands.scenarios import build_agent, model_of


def _recorded(manager: LedgerSessionManager, agent: Any) -> tuple[list[Any], int, list[str]]:
    conversation = manager.conversation(agent.agent_id)
    return (
        [e.message.to_strands()["content"] for e in conversation.view],
        conversation.state.model_call_count,
        [r.strategy for r in manager.ledger.reductions("s", agent.agent_id)],
    )


async def _take_turns(agent: Any, ledger: Ledger, threads: set[int] | None) -> set[int]:
    """Every turn of :data:`STEPS` (``threads``: add the threads that ran SQL); the loop's thread, as a set."""
    for n, script in enumerate(STEPS):
        model_of(agent).extend(script)
        if threads is None:
            await agent.invoke_async(f"question {n}")
            continue
        with statement_threads(ledger.store) as seen:
            await agent.invoke_async(f"question {n}")
        threads.update(seen)
    return {threading.get_ident()}


STEPS: list[list[Any]] = [
    [Reply("answer 0")],
    [CallTool("lookup", {"key": "alpha"}, "tu-1"), Reply("alpha found")],
    *[[Reply(f"answer {n}")] for n in range(2, 14)],
]
"""Fourteen turns, one with a tool call; past the window of 10 every turn also evicts."""


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_every_commit_of_a_turn_runs_on_the_agent_s_loop_thread_and_records_what_a_worker_records(
    url: str, tmp_path: Any, hops: list[str]
) -> None:
    recorded = {}
    for inline in (True, False):
        ledger = Ledger.connect(url if url != "sqlite" else f"sqlite:///{tmp_path}/inline-{inline}.db")
        manager = LedgerSessionManager("s", ledger=ledger, inline=inline)
        agent = build_agent(manager, SlidingWindowConversationManager(window_size=10))
        hops.clear()  # the agent's initialization
        threads: set[int] = set()
        loop_thread = asyncio.run(_take_turns(agent, ledger, threads if url == "sqlite" else None))
        if inline:
            assert hops == []  # nothing handed to a worker
            if url == "sqlite":
                assert threads == loop_thread  # every statement on the agent's loop thread
        else:
            assert len(hops) == 2 * len(STEPS) + 2  # two commits a turn; the tool turn's toolUse and toolResult
            if url == "sqlite":
                assert not threads & loop_thread
        recorded[inline] = _recorded(manager, agent)
        assert [e.entry_id for e in manager.conversation(agent.agent_id).view] == [
            m["tracking_id"] for m in agent.messages
        ]
        ledger.close()
    assert recorded[True][0] == recorded[False][0]
    assert recorded[True][1] == recorded[False][1] == len(STEPS) + 1  # the tool turn calls the model twice
    assert recorded[True][2] == recorded[False][2] != []  # the same evictions, recorded alike


def test_a_commit_that_meets_a_write_lock_goes_to_a_worker_and_the_loop_keeps_beating(
    tmp_path: Any, hops: list[str]
) -> None:
    path = tmp_path / "locked.db"
    ledger = Ledger.connect(f"sqlite:///{path}")
    manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    lags: list[float] = []

    async def main() -> None:
        model_of(agent).extend([Reply("first")])
        await agent.invoke_async("question 0")
        hops.clear()
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        threading.Timer(0.3, holder.commit).start()  # the lock is released 0.3 s later
        beat = asyncio.create_task(heartbeat(lags, 0.01))
        await asyncio.sleep(0.02)
        model_of(agent).extend([Reply("second")])
        await agent.invoke_async("question 1")
        beat.cancel()
        holder.close()

    asyncio.run(main())
    assert hops  # the prompt's commit met the lock: it waited on a worker
    assert len(lags) >= 10  # the loop beat all through the 0.3 s the commit waited
    assert max(lags) < 0.25
    texts = [e.message.plain_text for e in Ledger(ledger.store).conversation("s", agent.agent_id).view]
    assert texts == ["question 0", "first", "question 1", "second"]
    ledger.close()


def test_an_inline_commit_that_would_wait_commits_nothing_and_runs_again_once(tmp_path: Any) -> None:
    """The binding's two inline works, stopped by a held lock, leave nothing behind; run again, they commit once."""
    path = tmp_path / "again.db"
    ledger = Ledger.connect(f"sqlite:///{path}")
    manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(manager, SlidingWindowConversationManager(window_size=40))
    model_of(agent).extend([Reply("answer 0")])
    asyncio.run(agent.invoke_async("question 0"))
    binding = manager.binding(agent.agent_id)
    conversation = manager.conversation(agent.agent_id)
    version = conversation.version

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    prompt: StrandsMessage = {"role": "user", "content": [{"text": "question 1"}]}
    agent.messages.append(prompt)  # as Strands adds a message before its callback
    assert isinstance(run_inline(binding.message_added, agent, prompt), WouldWait)
    answer: StrandsMessage = {"role": "assistant", "content": [{"text": "answer 1"}]}
    agent.messages.append(answer)
    binding.before_invocation()
    invocations = binding._invocations  # what the end of an invocation takes down
    assert isinstance(run_inline(binding.after_invocation, agent), WouldWait)
    assert binding._invocations == invocations  # not ended: the worker's run ends it
    assert conversation.version == version  # nothing committed
    holder.commit()
    holder.close()

    binding.message_added(agent, prompt)  # what the worker runs
    binding.after_invocation(agent)
    assert binding._invocations == invocations - 1
    assert conversation.version == version + 1  # the prompt and the answer, one commit
    restored = Ledger(ledger.store).conversation("s", agent.agent_id)
    assert [e.message.plain_text for e in restored.view] == ["question 0", "answer 0", "question 1", "answer 1"]
    ledger.close()


def test_inline_is_refused_for_stores_that_wait_on_a_network_and_off_there_by_default(
    redis_url: str, redis_key_prefix: str, tmp_path: Any
) -> None:
    with pytest.raises(ConfigurationError, match="inline must be a bool or None"):
        LedgerSessionManager("s", url=f"sqlite:///{tmp_path}/a.db", inline="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="only SQLite and in-memory"):
        LedgerSessionManager("s", url=redis_url, key_prefix=redis_key_prefix, inline=True)
    manager = LedgerSessionManager("s", url=redis_url, key_prefix=redis_key_prefix)
    try:
        assert manager.inline is False  # the default where a commit waits on a network
    finally:
        manager.close()


@pytest.mark.parametrize("listener", [False, True])
def test_with_a_contextledger_manager_the_end_of_each_call_runs_on_the_loop_unless_a_callback_of_yours_hears_it(
    tmp_path: Any, hops: list[str], listener: bool
) -> None:
    """The manager hears each call end (it reacts to an overflow) without blocking: no hop for it on SQLite.

    A callback of the application on the conversation's ``AfterModelCallEvent`` may block:
    the end of each call then goes to a worker, as before.
    """
    from contextledger.core.hooks import AfterModelCallEvent
    from contextledger.integrations.strands import StrandsConversationManager
    from contextledger.managers import SlidingWindowConversationManager as LedgerSlidingWindow

    heard: list[bool] = []
    ledger = Ledger.connect(f"sqlite:///{tmp_path}/managed.db")
    manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(manager, StrandsConversationManager(LedgerSlidingWindow(window_size=40)))
    if listener:
        conversation = manager.conversation(agent.agent_id)
        conversation.hooks.add_callback(AfterModelCallEvent, lambda _e: heard.append(True))

    async def main() -> None:
        for n in range(3):
            model_of(agent).extend([Reply(f"answer {n}")])
            await agent.invoke_async(f"question {n}")

    hops.clear()
    asyncio.run(main())
    ended = [name for name in hops if name == "<lambda>"]
    # the count before each call is the manager's to plan on: a worker's, either way; the
    # end of each call: a worker's only when a callback of yours hears it
    assert len(ended) == 3 * (2 if listener else 1)
    assert heard == ([True] * 3 if listener else [])
    assert manager.conversation(agent.agent_id).state.model_call_count == 3
    manager.close()
