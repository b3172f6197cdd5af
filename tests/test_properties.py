"""Property-based tests: random conversations, pins, reductions and crashes keep the ledger's semantics."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import (
    Conversation,
    MemoryStore,
    Message,
    NullConversationManager,
    PolicyManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)
from contextledger.core.changeset import Planned, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import ContextWindowOverflowError, InvalidPlan, ReductionFailed
from contextledger.managers.base import ConversationManager, ReductionRequest
from contextledger.model.records import ViewEntry
from contextledger.stores.capabilities import CompleteStore
from tests.core.helpers import ScriptedManager, rule_violations
from tests.managers.helpers import assert_valid_view, overflow
from tests.soak import examples

TRIGGERS = ["per_turn", "proactive", "reactive", "end_of_invocation", "manual"]

protected = st.fixed_dictionaries({"first": st.integers(0, 2), "last": st.integers(0, 2)})
policy_specs = st.one_of(
    st.tuples(
        st.just("sliding_window"),
        st.fixed_dictionaries(
            {
                "window_size": st.integers(1, 8),
                "should_truncate_results": st.booleans(),
                "protected_messages": protected,
                "truncate_threshold": st.just(200),
            }
        ),
    ),
    st.tuples(
        st.just("summarizing"),
        st.fixed_dictionaries(
            {
                "summary_ratio": st.sampled_from([0.1, 0.3, 0.5, 1.0]),
                "preserve_recent_messages": st.integers(0, 4),
                "protected_messages": protected,
            }
        ),
    ),
    st.tuples(
        st.just("turn_window"),
        st.fixed_dictionaries(
            {
                "max_user_turns": st.integers(1, 3),
                "remove_tool_messages": st.booleans(),
                "protected_messages": protected,
            }
        ),
    ),
)
custom_specs = st.tuples(
    st.just("custom"),
    st.fixed_dictionaries(
        {"seed": st.integers(0, 2**16), "evict": st.sampled_from([0.0, 0.2, 0.5, 1.0]), "summary": st.booleans()}
    ),
)
# The null manager is one case among many: weight the managers that reduce.
manager_specs: st.SearchStrategy[tuple[str, dict[str, Any]]] = st.one_of(
    policy_specs, policy_specs, policy_specs, custom_specs, st.tuples(st.just("null"), st.just({}))
)
content_steps = st.one_of(
    st.tuples(st.just("chat"), st.integers(1, 4)),
    st.tuples(st.just("tool"), st.integers(1, 3), st.booleans(), st.booleans()),
)
other_steps = st.one_of(
    st.tuples(st.sampled_from(["pin", "unpin"]), st.integers(0, 1000)),
    st.tuples(st.just("crash"), st.booleans()),
)
reduce_steps = st.tuples(st.just("reduce"), st.sampled_from(TRIGGERS))
# A round grows the conversation, maybe pins or crashes, then reduces at least once.
rounds = st.tuples(
    st.lists(content_steps, min_size=1, max_size=3),
    st.lists(other_steps, max_size=2),
    st.lists(reduce_steps, min_size=1, max_size=2),
).map(lambda r: [*r[0], *r[1], *r[2]])


def scripts_of(min_rounds: int, max_rounds: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Scripts of whole rounds, flattened into steps."""
    return st.lists(rounds, min_size=min_rounds, max_size=max_rounds).map(lambda rs: [s for r in rs for s in r])


scripts = scripts_of(2, 8)


def random_plans(seed: int, evict: float, summary: bool) -> ScriptedManager:
    """A custom manager whose plans are random (but a pure function of the view): evictions
    anywhere, pinned entries and the newest prompt included, half tool pairs, summaries
    over ranges with gaps. The conversation must correct them or refuse them."""

    def script(view: View, request: ReductionRequest) -> Planned | None:
        if not len(view):
            return None
        rng = random.Random(f"{seed}:{request.trigger}:{','.join(view.ids)}")
        ids = view.ids
        draft = None
        if summary and rng.random() < 0.6:
            low = rng.randrange(len(ids))
            span = ids[low : low + rng.randint(1, 4)]
            replaces = tuple(i for k, i in enumerate(span) if k in (0, len(span) - 1) or rng.random() < 0.8)
            draft = SummaryDraft(
                content=None if rng.random() < 0.5 else "given", summarizer="random", replaces=replaces
            )
        plan = ReductionPlan(strategy="random", evict=tuple(i for i in ids if rng.random() < evict), summary=draft)
        return Planned(None if plan.is_empty else plan, None, summarize=written)

    return ScriptedManager(script)  # type: ignore[arg-type]


def written(entries: Sequence[ViewEntry]) -> str:
    return f"summary of {len(entries)} entries"


def build_manager(spec: tuple[str, dict[str, Any]]) -> ConversationManager:
    name, options = spec
    if name == "custom":
        return random_plans(**options)
    if name == "sliding_window":
        return SlidingWindowConversationManager(**options)
    if name == "summarizing":
        return SummarizingConversationManager(**options)
    if name == "turn_window":
        return TurnWindowConversationManager(**options)
    return NullConversationManager()


@dataclass
class Run:
    store: CompleteStore
    spec: tuple[str, dict[str, Any]]
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    agent_id: str = "default"
    appended: set[str] = field(default_factory=set)
    pinned: set[str] = field(default_factory=set)
    counter: int = 0
    reductions: int = 0
    conv: Conversation = field(init=False)

    def __post_init__(self) -> None:
        self.conv = Conversation(self.store, self.session_id, self.agent_id, manager=build_manager(self.spec))

    def append(self, *messages: Message) -> None:
        self.conv.append(*messages)
        self.appended.update(m.message_id for m in messages)

    def tid(self) -> str:
        self.counter += 1
        return f"t{self.counter}"

    # -- steps -----------------------------------------------------------------------------

    def chat(self, count: int) -> None:
        self.append(*(Message.user(f"u{i}. more") if i % 2 == 0 else Message.assistant(f"a{i}.") for i in range(count)))

    def tool(self, calls: int, parallel: bool, big: bool) -> None:
        result = "r" * (600 if big else 20)
        messages = [Message.user("do it")]
        if parallel:
            tids = [self.tid() for _ in range(calls)]
            uses = [{"toolUse": {"toolUseId": t, "name": "f", "input": {}}} for t in tids]
            results = [
                {"toolResult": {"toolUseId": t, "status": "success", "content": [{"text": result}]}} for t in tids
            ]
            messages += [Message(role="assistant", content=uses), Message(role="user", content=results)]
        else:
            for _ in range(calls):
                t = self.tid()
                messages += [Message.tool_use(t, "f", {"n": 1}), Message.tool_result(t, result)]
        messages.append(Message.assistant("done."))
        self.append(*messages)

    def pin(self, pick: int, pinned: bool) -> None:
        view = self.conv.view
        if not len(view):
            return
        index = pick % len(view)
        if view[index].kind != "message":
            return
        entry_id = self.conv.pin_index(index, pinned)
        (self.pinned.add if pinned else self.pinned.discard)(entry_id)

    def reduce(self, trigger: str) -> None:
        view = self.conv.view
        done = len(self.store.reductions(self.session_id, self.agent_id))
        self.reduce_by(trigger)
        self.check_rules(view, done)

    def check_rules(self, view: View, done: int) -> None:
        """The view rules held for the reduction the step committed, if any."""
        new = self.store.reductions(self.session_id, self.agent_id)[done:]
        if len(new) != 1 or new[0].strategy == "tool_pair_repair":
            return
        summary_id, replaces = new[0].summary_id, tuple[str, ...]()
        if summary_id is not None:
            (summary,) = [s for s in self.store.summaries(self.session_id, self.agent_id) if s.summary_id == summary_id]
            replaces = summary.replaces
        assert rule_violations(view, self.conv.view, summary_id, replaces) == []
        self.reductions += 1

    def reduce_by(self, trigger: str) -> None:
        conv, manager = self.conv, self.conv.manager
        before = len(self.store.reductions(self.session_id, self.agent_id))
        if trigger == "per_turn":
            if isinstance(manager, SlidingWindowConversationManager):
                manager.per_turn = True
            conv.before_model_call()
            conv.after_model_call(None)
            if isinstance(manager, SlidingWindowConversationManager):
                manager.per_turn = False
        elif trigger == "proactive":
            if isinstance(manager, PolicyManager):
                manager.proactive_compression = True
            conv.before_model_call(context_window_limit=100, projected_input_tokens=100)
            conv.after_model_call(None)
            if isinstance(manager, PolicyManager):
                manager.proactive_compression = None
        elif trigger == "reactive":
            conv.before_model_call()
            try:
                retry = conv.after_model_call(overflow())
            except ReductionFailed:
                assert len(self.store.reductions(self.session_id, self.agent_id)) == before
            except ContextWindowOverflowError:
                assert isinstance(manager, NullConversationManager)
            else:
                # Reactive must reduce (and ask for a retry) or raise.
                assert retry is True
                assert len(self.store.reductions(self.session_id, self.agent_id)) == before + 1
        elif trigger == "end_of_invocation":
            conv.after_invocation()
        else:
            view = conv.view
            try:
                conv.reduce("manual")
            except InvalidPlan:
                # Refused whole: nothing was written.
                assert isinstance(manager, ScriptedManager)
                assert len(self.store.reductions(self.session_id, self.agent_id)) == before
                assert conv.view.ids == view.ids

    def crash(self, host_went_on: bool) -> None:
        # The process dies after the model asked for a tool and before its result was stored.
        self.append(Message.user("start"), Message.tool_use(self.tid(), "slow", {}))
        version = self.conv.version
        self.conv = Conversation(self.store, self.session_id, self.agent_id, manager=build_manager(self.spec))
        # Opening never writes: the view is still mid-tool.
        assert self.conv.view.dangling_tool_uses()
        assert self.conv.version == version
        if host_went_on:
            # The next real write carries the repair, in the same changeset.
            self.append(Message.user("are you there?"))
            assert self.conv.version == version + 1
            assert self.store.reductions(self.session_id, self.agent_id)[-1].strategy == "tool_pair_repair"
        else:
            self.conv.repair_interrupted_tools()
        assert not self.conv.view.dangling_tool_uses()
        self.check_restore()

    def run(self, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind == "chat":
            self.chat(step[1])
        elif kind == "tool":
            self.tool(step[1], step[2], step[3])
        elif kind in ("pin", "unpin"):
            self.pin(step[1], kind == "pin")
        elif kind == "reduce":
            self.reduce(step[1])
        else:
            self.crash(step[1])

    # -- invariants --------------------------------------------------------------------------

    def check(self) -> None:
        conv, store, sid = self.conv, self.store, self.session_id
        assert_valid_view(conv)
        view = {e.entry_id: e for e in conv.view}
        # Pinned entries are never evicted, and stay pinned.
        assert self.pinned <= set(view)
        assert all(view[p].pinned for p in self.pinned)
        # Nothing is lost: every message is in history, the active ones are exactly the view's.
        history = {h.message.message_id: h for h in store.history(sid, self.agent_id)}
        assert self.appended <= set(history)
        assert {k for k, h in history.items() if h.status == "active"} == {
            e.entry_id for e in conv.view if e.kind == "message"
        }
        summaries = {s.summary_id: s for s in store.summaries(sid, self.agent_id)}
        assert {k for k, s in summaries.items() if s.status == "active"} == {
            e.entry_id for e in conv.view if e.kind == "summary"
        }
        for reduction in store.reductions(sid, self.agent_id):
            for entry_id in reduction.evicted:
                assert entry_id in history or entry_id in summaries
                assert entry_id not in view
        for summary in summaries.values():
            for entry_id in summary.replaces:
                assert entry_id in history or entry_id in summaries

    def check_restore(self) -> None:
        restored = Conversation(self.store, self.session_id, self.agent_id)
        assert list(restored.view.entries) == list(self.conv.view.entries)
        assert restored.model_call_count == self.conv.model_call_count
        assert restored.version == self.conv.version


def run_script(store: CompleteStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]) -> None:
    run = Run(store, spec)
    for step in script:
        run.run(step)
        run.check()
    run.check_restore()


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=scripts)
def test_random_conversations_keep_the_semantics(
    memory_store: CompleteStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]
) -> None:
    run_script(memory_store, spec, script)


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=scripts_of(1, 4))
def test_random_conversations_on_every_backend(
    store: CompleteStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]
) -> None:
    run_script(store, spec, script)


@settings(max_examples=examples(60), deadline=None)
@given(spec=policy_specs, script=scripts)
def test_plans_are_deterministic(spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]) -> None:
    run = Run(MemoryStore(), spec)
    for step in script:
        if step[0] != "crash":
            run.run(step)
    manager = build_manager(spec)
    assert isinstance(manager, PolicyManager)
    for trigger in TRIGGERS:
        request = ReductionRequest(trigger=trigger)
        assert manager.make_plan(run.conv.view, request) == manager.make_plan(run.conv.view, request)
