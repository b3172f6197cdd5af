"""Strands agents on several threads sharing one ``LedgerSessionManager`` and one ledger.

Each thread runs its own agent (its own ``agent_id``) through turns with tool calls and
Strands' sliding window, all at once, on every backend. Afterwards, read by a fresh
ledger: every message each agent holds is stored once and in order, the eviction history
names each message Strands' manager removed, and ``view_at`` gives back the input of
every model call each agent made. A thread that hangs or raises fails the test.

Default: 6 agents x 8 turns; ``CONTEXTLEDGER_SOAK=1``: 12 agents x 40 turns.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from strands.agent.conversation_manager import SlidingWindowConversationManager

from contextledger.integrations.strands import CallTool, LedgerSessionManager, Reply, ScriptedModel
from contextledger.ledger import Ledger
from contextledger.stores.capabilities import CompleteStore
from contextledger.testing.strands import assert_inputs_exact, build_agent, model_inputs
from tests.reliability.conftest import SOAK, Report

AGENTS, TURNS = (12, 40) if SOAK else (6, 8)
SESSION = "threads"


def _turn(agent: Any, number: int) -> None:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    if number % 2:
        model.extend([CallTool("lookup", {"key": f"k{number}"}, f"{agent.agent_id}-tu-{number}"), Reply("found")])
    else:
        model.extend([Reply(f"answer {number}")])
    agent(f"question {number}")


def test_agents_on_threads_lose_nothing_and_stay_exact(
    store: CompleteStore, report: Report, request: pytest.FixtureRequest
) -> None:
    ledger = Ledger(store)
    session_manager = LedgerSessionManager(SESSION, ledger=ledger)
    agents = [
        build_agent(session_manager, SlidingWindowConversationManager(window_size=6), agent_id=f"agent-{n}")
        for n in range(AGENTS)
    ]
    errors: list[BaseException] = []
    start = threading.Barrier(AGENTS)

    def work(agent: Any) -> None:
        try:
            start.wait(timeout=30)
            for number in range(TURNS):
                _turn(agent, number)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    began = time.monotonic()
    threads = [threading.Thread(target=work, args=(a,), daemon=True) for a in agents]
    for thread in threads:
        thread.start()
    deadline = began + 300
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - began
    assert not any(t.is_alive() for t in threads), "an agent thread hung"
    assert errors == []

    fresh = Ledger(store)
    calls = evicted = 0
    for agent in agents:
        history = fresh.history(SESSION, agent.agent_id)
        ids = [h.message.message_id for h in history]
        assert len(ids) == len(set(ids)), "a message was stored twice"
        active = [h.message.message_id for h in history if h.status == "active"]
        assert active == [m["tracking_id"] for m in agent.messages]
        assert {e.entry_id for e in fresh.evictions(SESSION, agent.agent_id)} == set(ids) - set(active)
        inputs = model_inputs(agent.model)  # type: ignore[arg-type]
        assert_inputs_exact(fresh, SESSION, agent.agent_id, inputs)
        calls += len(inputs)
        evicted += len(ids) - len(active)
    backend = request.node.callspec.params["store"]
    report(
        f"threads, {backend}: {AGENTS} agents x {TURNS} turns at once, {calls} model calls, {evicted} evictions,"
        f" {elapsed:.1f} s: 0 lost, 0 doubled, every input exact"
    )
