"""contextledger's spans inside the hosts' own traces: real Strands and OpenAI Agents runs, scripted models."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, set_trace_processors, set_tracing_disabled
from agents.tracing.processors import default_processor

from contextledger.aio import AsyncLedger
from contextledger.integrations.openai_agents import LedgerSession, ScriptedModel
from contextledger.integrations.openai_agents.tracing import OpenTelemetryTracingProcessor
from contextledger.managers import SlidingWindowConversationManager
from tests.telemetry.conftest import ROOT, Recorded, attrs, run_python


def strands_spans(url: str) -> list[dict[str, Any]]:
    done = run_python(["-m", "tests.telemetry.strands_child", url], cwd=ROOT, path=[ROOT])
    spans: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return spans


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_strands_reductions_and_commits_are_children_of_the_agent_turn(backend: str, tmp_path: Path) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/strands.db"
    spans = strands_spans(url)
    by_id = {s["span_id"]: s for s in spans}

    def parent(span: dict[str, Any]) -> dict[str, Any] | None:
        return by_id.get(span["parent_id"])

    per_turn = [
        s
        for s in spans
        if s["name"] == "contextledger.reduction" and s["attributes"]["contextledger.reduction.trigger"] == "per_turn"
    ]
    assert per_turn, [s["name"] for s in spans]
    for reduction in per_turn:
        cycle = parent(reduction)
        assert cycle is not None
        assert cycle["name"] == "execute_event_loop_cycle"
        agent = parent(cycle)
        assert agent is not None
        assert agent["name"].startswith("invoke_agent")
        assert reduction["trace_id"] == agent["trace_id"]
        assert reduction["attributes"]["contextledger.reduction.outcome"] == "committed"
        [commit] = [s for s in spans if s["parent_id"] == reduction["span_id"]]
        assert commit["name"] == "contextledger.commit"
        assert (
            commit["attributes"]["contextledger.reduction.id"] == reduction["attributes"]["contextledger.reduction.id"]
        )
    # every commit made during an invocation is in that invocation's trace
    agent_traces = {s["trace_id"] for s in spans if s["name"].startswith("invoke_agent")}
    commits = [s for s in spans if s["name"] == "contextledger.commit"]
    assert (
        len([c for c in commits if c["trace_id"] in agent_traces]) >= len(commits) - 1
    )  # the agent's first sync may precede it


@pytest.fixture
def bridge(otel: Recorded) -> Iterator[OpenTelemetryTracingProcessor]:
    processor = OpenTelemetryTracingProcessor()
    set_trace_processors([processor])  # only the mirror: nothing leaves the machine
    set_tracing_disabled(False)
    yield processor
    set_tracing_disabled(True)
    processor.shutdown()
    set_trace_processors([default_processor()])


def test_openai_agents_reductions_are_children_of_the_sdk_turn_span(
    otel: Recorded, bridge: OpenTelemetryTracingProcessor
) -> None:
    async def run() -> None:
        ledger = await AsyncLedger.connect("memory://")
        manager = SlidingWindowConversationManager(window_size=2, per_turn=True)
        session = LedgerSession("oa", ledger=ledger, manager=manager)
        agent = Agent(name="helper", model=ScriptedModel(["a0", "a1", "a2"], name="m"))
        for n in range(3):
            await Runner.run(agent, f"q{n}", session=session, run_config=session.run_config())
        await ledger.close()

    asyncio.run(run())
    reductions = otel.spans("contextledger.reduction")
    assert len(reductions) == 2  # the second and third runs start over the window
    for reduction in reductions:
        turn = otel.parent_of(reduction)
        assert turn is not None
        assert turn.name == "turn 1"
        assert attrs(turn)["openai_agents.span.type"] == "turn"
        agent = otel.parent_of(turn)
        assert agent is not None
        assert agent.name == "invoke_agent helper"
        assert attrs(agent)["gen_ai.agent.name"] == "helper"
        assert reduction.context.trace_id == agent.context.trace_id
        [commit] = [s for s in otel.spans("contextledger.commit") if otel.parent_of(s) is reduction]
        assert attrs(commit)["contextledger.commit.evicted"] == attrs(reduction)["contextledger.reduction.evicted"]
    # the mirrors were all ended, and the SDK's traces are each one OpenTelemetry trace
    workflows = [s for s in otel.spans() if s.name == "Agent workflow"]
    assert len(workflows) == 3
    assert all(
        otel.parent_of(s) is not None
        for s in otel.spans()
        if s.context.trace_id in {w.context.trace_id for w in workflows} and s not in workflows
    )


def test_an_otel_span_opened_inside_the_sdk_span_stays_the_parent(
    otel: Recorded, bridge: OpenTelemetryTracingProcessor
) -> None:
    from agents.tracing import custom_span, trace

    from contextledger import Conversation, Message
    from contextledger.stores.memory import MemoryStore

    chat = Conversation(MemoryStore(), "s")
    tracer = otel.tracer_provider.get_tracer("app")
    with trace("workflow"), custom_span("step"):
        chat.append(Message.user("inside the SDK span"))
        with tracer.start_as_current_span("tool work") as own:
            chat.append(Message.user("inside the application's span"))
    first, second = otel.spans("contextledger.commit")
    step = otel.parent_of(first)
    assert step is not None
    assert step.name == "custom step"
    assert otel.parent_of(second) is not None
    assert otel.parent_of(second).context.span_id == own.get_span_context().span_id  # type: ignore[union-attr]


def test_without_a_provider_the_bridge_does_nothing(bridge: OpenTelemetryTracingProcessor, otel: Recorded) -> None:
    from agents.tracing import custom_span, trace

    from contextledger import telemetry

    telemetry.configure(enabled=False)
    with trace("workflow"), custom_span("step"):
        assert bridge.parent_context() is None
    assert otel.spans() == []
