"""Property: every model call of a real ``Runner`` is what ``view_at`` says it was, on every backend.

Random sessions -- runs with tool calls (several at once, with reasoning), handoff-free
multi-call turns, pins, a model that fails, restarts of the session object, ``run`` and
``run_streamed`` -- under contextledger's managers and the SDK's own means (its
``ToolOutputTrimmer`` as the application's input filter, ``SessionSettings.limit``).
The scripted models log what each call was given; ``view_at(model_call=N)`` must give
back each one.

``CONTEXTLEDGER_HOST_EXAMPLES`` sets the examples per backend (default 12).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable
from typing import Any

from agents import Agent
from agents.extensions import ToolOutputTrimmer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from contextledger.aio import AsyncLedger
from contextledger.errors import PinError
from contextledger.integrations.openai_agents import LedgerSession, Reply, ToolCall
from contextledger.integrations.openai_agents.scripted import ModelCall, ScriptStep
from contextledger.testing.openai_runs import MANAGERS, Logged, assert_inputs_exact, get_weather, run_turns

EXAMPLES = int(os.environ.get("CONTEXTLEDGER_HOST_EXAMPLES", "12"))
HOSTS: dict[str, dict[str, Callable[[], Any]]] = {
    "sdk-trimmer": {"input_filter": lambda: ToolOutputTrimmer(recent_turns=1, max_output_chars=80, preview_chars=10)},
    "sdk-limit": {"session_settings": lambda: {"limit": 3}},
}

calls = st.lists(st.sampled_from(["Oslo", "Rome", "Lima"]), min_size=1, max_size=2)
response = st.tuples(calls, st.booleans())  # the calls, and whether a reasoning item comes first
turn = st.fixed_dictionaries({"tools": st.lists(response, max_size=2), "fails": st.booleans()})
step = st.one_of(turn, turn, turn, st.tuples(st.just("pin"), st.integers(0, 9)), st.just("restart"))
runs = st.tuples(
    st.sampled_from([*sorted(MANAGERS), *sorted(HOSTS)]),
    st.sampled_from(["run", "run_streamed"]),
    st.lists(step, min_size=1, max_size=5),
)


class ProviderDown(Exception):
    """The model call fails (the script raises it)."""


def responses(spec: dict[str, Any], number: int) -> list[ScriptStep]:
    out: list[ScriptStep] = []
    for k, (cities, reasoning) in enumerate(spec["tools"]):
        tools = tuple(ToolCall("get_weather", {"city": c}, f"call-{number}-{k}-{i}") for i, c in enumerate(cities))
        out.append(Reply(calls=tools, reasoning=f"think {number}" if reasoning else None))
    out.append(ProviderDown("provider down") if spec["fails"] else f"answer {number}")
    return out


async def play(ledger: AsyncLedger, kind: str, mode: str, script: list[Any]) -> int:
    session_id = f"p-{uuid.uuid4().hex[:12]}"
    log: list[ModelCall] = []

    def open_session() -> tuple[LedgerSession, Agent[Any]]:
        options = {name: make() for name, make in HOSTS.get(kind, {}).items()}
        manager = MANAGERS[kind]() if kind in MANAGERS else None
        session = LedgerSession(session_id, ledger=ledger, manager=manager, **options)
        model = Logged([], name=f"{session_id}-{len(log)}", log=log)
        return session, Agent(name="A", model=model, tools=[get_weather])

    session, agent = open_session()
    failed = 0
    for number, spec in enumerate(script):
        if spec == "restart":
            session, agent = open_session()
        elif isinstance(spec, tuple):
            conversation = await session.conversation()
            if len(conversation.view):
                with contextlib.suppress(PinError):  # a summary cannot be pinned
                    await conversation.pin_index(spec[1] % len(conversation.view))
        else:
            agent.model.add(*responses(spec, number))  # type: ignore[union-attr]
            try:
                await run_turns(session, agent, [f"question {number}"], mode, run_config=session.run_config())
            except ProviderDown:
                failed += 1
    event("a model call failed" if failed else "every call answered")
    return await assert_inputs_exact(ledger, session, log)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=runs)
def test_view_at_is_every_input_a_runner_gave_its_model(
    ledger_url: tuple[str, dict[str, Any]], run: tuple[str, str, list[Any]]
) -> None:
    async def main() -> None:
        url, options = ledger_url
        ledger = await AsyncLedger.connect(url, **options)
        try:
            await play(ledger, *run)
        finally:
            await ledger.close()

    asyncio.run(main())
