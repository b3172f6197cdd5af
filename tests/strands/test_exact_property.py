"""Property: a real Strands agent's every model call is what ``view_at`` says it was, on every backend.

Random runs -- turns with tool calls, pins made by the model, context overflows,
restarts of the agent -- under every kind of conversation manager (Strands' own, none,
contextledger's through the adapter). The scripted model records what each call was
given; then ``view_at(model_call=N)`` must give back each one, and ``fork(at_call=N)``
the last one (when it holds at most one summary: a fork carries one). A restart drops
the calls whose count no commit carried yet (a crash during a model call loses that
call's count), as the ledger promises.

``CONTEXTLEDGER_HOST_EXAMPLES`` sets the examples per backend (default 5; 50 in soak mode).
"""

from __future__ import annotations

import gc
import os
import uuid
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from strands.types.exceptions import ContextWindowOverflowException

from contextledger.integrations.strands import CallTool, LedgerSessionManager, Overflow, Reply
from contextledger.integrations.strands.scripted import ProviderValidationError, Step
from contextledger.ledger import Ledger
from contextledger.stores.capabilities import CompleteStore
from contextledger.testing.hosts import strands_input
from contextledger.testing.strands import BIG, MANAGERS, assert_inputs_exact, build_agent, model_inputs
from tests.soak import examples

EXAMPLES = int(os.environ.get("CONTEXTLEDGER_HOST_EXAMPLES", str(examples(5))))  # soak mode: 50

tool_call = st.one_of(
    st.builds(lambda k: ("lookup", {"key": f"k{k}"}), st.integers(0, 9)),
    st.builds(lambda k: ("remember", {"fact": f"fact {k}"}), st.integers(0, 9)),
    st.builds(lambda i: ("pin_message", {"index": i}), st.integers(-3, 3)),
)
turn = st.fixed_dictionaries(
    {
        "tools": st.lists(tool_call, max_size=2),
        "overflow": st.booleans(),
        "big": st.booleans(),  # the answer reports input tokens past the proactive threshold
    }
)
step = st.one_of(turn, turn, turn, st.just("restart"))
runs = st.tuples(st.sampled_from(sorted(MANAGERS)), st.lists(step, min_size=1, max_size=6))


def steps_of(spec: dict[str, Any], number: int, manager: str) -> list[Step]:
    steps: list[Step] = []
    if spec["overflow"] and manager != "strands-null":
        steps.append(Overflow())
    for k, (name, arguments) in enumerate(spec["tools"]):
        steps.append(CallTool(name, arguments, f"tu-{number}-{k}"))
    steps.append(Reply(f"answer {number}", input_tokens=BIG if spec["big"] else None))
    return steps


def check_run(store: CompleteStore, manager: str, script: list[Any]) -> None:
    ledger = Ledger(store)
    session_id = f"p-{uuid.uuid4().hex[:12]}"
    agent = build_agent(LedgerSessionManager(session_id, ledger=ledger), MANAGERS[manager]())
    inputs: list[list[dict[str, Any]]] = []
    failed = 0
    for number, spec in enumerate(script):
        if spec == "restart":
            inputs += model_inputs(agent.model)  # type: ignore[arg-type]
            # What no commit carried (the count of a call that failed) is lost with the process.
            del inputs[ledger.conversation(session_id).model_call_count :]
            del agent
            gc.collect()
            agent = build_agent(LedgerSessionManager(session_id, ledger=ledger), MANAGERS[manager]())
            continue
        agent.model.extend(steps_of(spec, number, manager))  # type: ignore[attr-defined]
        try:
            agent(f"question {number}")
        except (ContextWindowOverflowException, ProviderValidationError):
            # Nothing could be reduced, or a Strands manager left a view the provider refuses
            # (its summary behind a pinned toolUse): the invocation fails loudly, the call counts.
            failed += 1
            agent.model.script.clear()  # type: ignore[attr-defined]
    event("an invocation failed" if failed else "every invocation answered")
    inputs += model_inputs(agent.model)  # type: ignore[arg-type]
    del inputs[ledger.conversation(session_id).model_call_count :]
    assert_inputs_exact(ledger, session_id, "default", inputs)
    last = ledger.view_at(session_id, model_call=len(inputs)) if inputs else None
    if last is not None and sum(e.kind == "summary" for e in last) <= 1:  # a fork carries one summary
        ledger.fork(session_id, f"{session_id}-fork", at_call=len(inputs))
        assert strands_input(ledger.conversation(f"{session_id}-fork").view) == inputs[-1]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=runs)
def test_view_at_is_every_input_a_strands_agent_gave_its_model(
    store: CompleteStore, run: tuple[str, list[Any]]
) -> None:
    check_run(store, *run)
