"""Property: a conversation moved to another store is the same conversation, past views included.

Random runs (every built-in manager, pins, tool turns, reactive retries, crashes,
restarts, undos) on one store; its records are written to another store, read back
equal, exported to the same bytes, and ``view_at`` there gives back the input of every
model call the run recorded.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from contextledger.history.transfer import dump_lines, read_conversation, write_conversation
from contextledger.history.travel import view_at
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.soak import examples
from tests.test_properties import manager_specs
from tests.travel.test_view_at_property import TravelRun, shape, travel_scripts


def check_move(source: CompleteStore, target: CompleteStore, spec: tuple[str, Any], script: list[Any]) -> None:
    run = TravelRun(source, spec)
    for step in script:
        run.run(step)
    records = read_conversation(source, run.session_id, "default")
    if records is None:  # nothing was committed
        return
    assert write_conversation(target, records) == "imported"
    moved = read_conversation(target, run.session_id, "default")
    assert moved == records
    assert moved is not None
    assert dump_lines([moved]) == dump_lines([records])
    assert write_conversation(target, records) == "unchanged"
    for call, seen in run.calls.items():
        assert shape(view_at(target, run.session_id, model_call=call)) == seen, f"model call {call}"


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=travel_scripts)
def test_a_moved_conversation_is_the_same(spec: tuple[str, Any], script: list[Any]) -> None:
    check_move(MemoryStore(), MemoryStore(), spec, script)


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=travel_scripts)
def test_moved_from_memory_to_every_backend(store: CompleteStore, spec: tuple[str, Any], script: list[Any]) -> None:
    check_move(MemoryStore(), store, spec, script)
