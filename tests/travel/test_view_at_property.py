"""Property: ``view_at`` rebuilds exactly what the model received at every model call.

Random runs (every built-in manager and random custom plans, pins, tool turns, reactive
retries, crashes, restarts and undos) record ``conversation.view`` right after every
``before_model_call`` -- the input of that call -- and the view after every step with
the time; then ``view_at(model_call=N)`` and ``view_at(at=t)`` must give back each record,
on every backend. An undo of the reduction a step just made must give back the view
from before that step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from contextledger import Conversation
from contextledger.errors import InvalidPlan, UndoConflict
from contextledger.history.travel import view_at
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import assert_valid_view
from tests.soak import examples
from tests.test_properties import Run, build_manager, manager_specs, rounds

Record = list[tuple[str, str, int, Any]]


def shape(entries: Any) -> Record:
    """What the model sees of a view: ids, kinds, order and the messages themselves."""
    return [(e.entry_id, e.kind, e.seq, e.message) for e in entries]


class Recording(Conversation):
    """A conversation that records its view right after every ``before_model_call``."""

    def __init__(self, *args: Any, calls: dict[int, Record], **kwargs: Any) -> None:
        self.calls = calls
        super().__init__(*args, **kwargs)

    def before_model_call(self, **kwargs: Any) -> Any:
        event = super().before_model_call(**kwargs)
        self.calls[self.model_call_count] = shape(self.view)
        return event


@dataclass
class TravelRun(Run):
    calls: dict[int, Record] = field(default_factory=dict)
    moments: list[tuple[datetime, Record]] = field(default_factory=list)
    before_reduce: tuple[str, Record] | None = None  # (reduction id, view before the step)
    undone: int = 0

    def __post_init__(self) -> None:
        self.conv = self.open()

    def open(self) -> Conversation:
        return Recording(self.store, self.session_id, manager=build_manager(self.spec), calls=self.calls)

    def run(self, step: tuple[Any, ...]) -> None:
        if step[0] == "restart":
            self.conv = self.open()
        elif step[0] == "undo":
            self.undo()
        else:
            done = len(self.store.reductions(self.session_id, "default"))
            view = shape(self.conv.view)
            super().run(step)
            new = self.store.reductions(self.session_id, "default")[done:]
            self.before_reduce = (new[0].reduction_id, view) if step[0] == "reduce" and len(new) == 1 else None
            if step[0] == "crash":
                self.conv = self.open()  # the process restarts with its recorder
        self.moments.append((utcnow(), shape(self.conv.view)))

    def undo(self) -> None:
        reductions = self.store.reductions(self.session_id, "default")
        if not reductions:
            return
        target, version = reductions[-1], self.conv.version
        try:
            self.conv.undo(target.reduction_id)
        except (InvalidPlan, UndoConflict):
            assert self.store.load(self.session_id, "default").state.version == version  # type: ignore[union-attr]
            return
        self.undone += 1
        assert self.conv.version == version + 1
        assert_valid_view(self.conv)
        undid_last_step = self.before_reduce is not None and self.before_reduce[0] == target.reduction_id
        if undid_last_step and target.strategy != "tool_pair_repair":
            assert self.before_reduce is not None
            assert shape(self.conv.view) == self.before_reduce[1]
        self.before_reduce = None


travel_rounds = st.tuples(
    rounds,
    st.lists(st.tuples(st.just("undo")), max_size=1),
    st.lists(st.tuples(st.just("restart")), max_size=1),
).map(lambda r: [*r[0], *r[1], *r[2]])
travel_scripts = st.lists(travel_rounds, min_size=1, max_size=5).map(lambda rs: [s for r in rs for s in r])


def check_run(store: CompleteStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]) -> None:
    run = TravelRun(store, spec)
    for step in script:
        run.run(step)
    event("an undo committed" if run.undone else "no undo committed")
    for call, seen in run.calls.items():
        assert shape(view_at(store, run.session_id, model_call=call)) == seen, f"model call {call}"
    for moment, seen in run.moments:
        assert shape(view_at(store, run.session_id, at=moment)) == seen, f"at {moment}"


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=travel_scripts)
def test_view_at_gives_back_every_model_input(
    memory_store: CompleteStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]
) -> None:
    check_run(memory_store, spec, script)


@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=travel_scripts)
def test_view_at_on_every_backend(
    store: CompleteStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]
) -> None:
    check_run(store, spec, script)
