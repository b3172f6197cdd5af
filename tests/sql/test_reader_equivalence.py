"""The SQLite reader (stdlib driver) and the engine (SQLAlchemy) restore equal snapshots and list equal records.

Random conversations -- evictions, summaries (superseding ones included), revisions of
truncated tool results, pins, repaired crashes, content of every shape -- are written
through the engine; after every step the reader's restore and the engine's restore of
the same rows must be equal, and equal to the live view. Likewise every listing the
store serves from the reader (history, entries, summaries, reductions, revisions, pin
events, evictions, agents, sessions) must equal the engine's, over several agents and
sessions.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Message
from contextledger.model.records import Snapshot
from contextledger.stores.base import AppendedBy
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.read import listings
from contextledger.stores.sql.read.restore import load
from contextledger.stores.sql.read.runner import EngineRunner
from tests.soak import examples
from tests.test_properties import Run, manager_specs, scripts_of

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)  # no lone surrogates
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
# Content a restore must decode exactly: any text, bytes, unknown block kinds, metadata.
unusual = st.one_of(
    texts.map(lambda t: Message.user(t or "x")),
    st.builds(
        lambda data, meta: Message(
            role="user",
            content=[{"text": "see"}, {"image": {"format": "png", "source": {"bytes": data}}}],
            metadata=meta,
        ),
        st.binary(max_size=16),
        st.dictionaries(texts, json_values, max_size=3),
    ),
    st.builds(lambda value: Message(role="assistant", content=[{"custom": value}]), json_values),
)


def _engine_load(store: SQLStore, session_id: str) -> Snapshot | None:
    with store.engine.connect() as conn, conn.begin():
        return load(conn, session_id, "default")


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=scripts_of(1, 4), extra=st.lists(unusual, max_size=4))
def test_the_reader_and_the_engine_restore_equal_snapshots(
    sqlite_store: SQLStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]], extra: list[Message]
) -> None:
    reader = sqlite_store.reader
    assert reader is not None
    run = Run(sqlite_store, spec)
    assert reader.load(run.session_id, "default") is None
    assert _engine_load(sqlite_store, run.session_id) is None
    if extra:
        run.append(*extra)
    for step in script:
        run.run(step)
        raw = reader.load(run.session_id, "default")
        engine = _engine_load(sqlite_store, run.session_id)
        assert raw is not None
        assert raw == engine
        assert list(raw.entries) == list(run.conv.view.entries)
        assert raw.state.version == run.conv.version
        assert raw.state.model_call_count == run.conv.model_call_count
        # Every record the reader built is one validation would accept unchanged.
        assert Snapshot.model_validate(raw) == raw


# -- the listings ------------------------------------------------------------------------

Listing = tuple[str, tuple[Any, ...], dict[str, Any]]
"""A listing to compare: the store method's name, its positional and keyword arguments."""


def _listings(store: SQLStore, conversations: list[tuple[str, str]]) -> list[Listing]:
    """Every listing of the conversations' sessions, with filters taken from what they hold.

    The time and trigger filters, and the cuts of ``entries``, use the values of
    recorded reductions, so a bound that equals a stored value is compared too.
    """
    calls: list[Listing] = [
        ("sessions", (), {"limit": 100, "offset": 0}),
        ("sessions", (), {"limit": 1, "offset": 1}),
        ("agents", ("no-such-session",), {}),
        ("history", ("no-such-session", "default"), {"include_evicted": True}),
        ("entries", ("no-such-session", "default", ["x"]), {"appended_by": None}),
    ]
    for session_id in dict.fromkeys(s for s, _ in conversations):
        calls += [
            ("agents", (session_id,), {}),
            ("summaries", (session_id, None), {}),
            ("reductions", (session_id, None), {}),
            ("pin_history", (session_id, None), {}),
            ("evictions", (session_id, None), {"trigger": None, "since": None}),
        ]
    for session_id, agent_id in conversations:
        history = store.history(session_id, agent_id)
        reductions = store.reductions(session_id, agent_id)
        ids = [h.message.message_id for h in history]
        calls += [
            ("history", (session_id, agent_id), {"include_evicted": True}),
            ("history", (session_id, agent_id), {"include_evicted": False}),
            ("summaries", (session_id, agent_id), {}),
            ("reductions", (session_id, agent_id), {}),
            ("pin_history", (session_id, agent_id), {}),
            ("revisions", (session_id, agent_id, None), {}),
            ("evictions", (session_id, agent_id), {"trigger": None, "since": None}),
            ("entries", (session_id, agent_id, [*ids[::2], "no-such-entry"]), {"appended_by": None}),
        ]
        calls += [("revisions", (session_id, agent_id, h.message.message_id), {}) for h in history if h.revision_count][
            :2
        ]
        for r in reductions[len(reductions) // 2 :][:2]:
            cut = AppendedBy(from_call=r.from_call, version=r.version, created_at=r.created_at)
            calls += [
                ("evictions", (session_id, agent_id), {"trigger": r.trigger, "since": r.created_at}),
                ("evictions", (session_id, None), {"trigger": None, "since": r.created_at + timedelta(microseconds=1)}),
                ("entries", (session_id, agent_id, ids), {"appended_by": cut}),
                ("entries", (session_id, agent_id, ids), {"appended_by": AppendedBy(created_at=r.created_at)}),
            ]
    return calls


def _on_the_engine(store: SQLStore, calls: list[Listing]) -> list[Any]:
    """The listings as the Core statements return them on the engine (the store serves them from the reader)."""
    with store.engine.connect() as conn, conn.begin():
        run = EngineRunner(conn)
        return [getattr(listings, name)(run, *args, **kwargs) for name, args, kwargs in calls]


# Random conversations (session index, agent), two of them agents of one session; each
# round of steps goes to one of them (or to the opened ones below).
CONVERSATIONS = ((0, "default"), (0, "reviewer"), (1, "default"))
# Two more, opened by fixed scripts in the second session, so every example lists each
# kind of row: a truncated tool result (a revision), a pin and an unpin; summaries
# superseding one another, an evicted summary, and an undo (a reduction that restores).
# The truncating window is wide enough that both results are revised, none evicted.
TRUNCATING = (
    "sliding_window",
    {
        "window_size": 12,
        "should_truncate_results": True,
        "protected_messages": {"first": 0, "last": 0},
        "truncate_threshold": 200,
    },
)
SUMMARIZING = (
    "summarizing",
    {"summary_ratio": 0.5, "preserve_recent_messages": 2, "protected_messages": {"first": 0, "last": 0}},
)
OPENINGS: tuple[tuple[str, tuple[str, dict[str, Any]], list[tuple[Any, ...]]], ...] = (
    (
        "tools",
        TRUNCATING,
        [("tool", 2, False, True), ("chat", 2), ("pin", 0), ("reduce", "reactive"), ("chat", 2), ("unpin", 0)],
    ),
    ("notes", SUMMARIZING, [("chat", 4), ("reduce", "manual")] * 3),
)
round_plans = st.lists(
    st.tuples(st.integers(0, len(CONVERSATIONS) + len(OPENINGS) - 1), scripts_of(1, 1)), min_size=1, max_size=5
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    specs=st.lists(manager_specs, min_size=len(CONVERSATIONS), max_size=len(CONVERSATIONS)),
    plan=round_plans,
    extra=st.lists(unusual, max_size=3),
)
def test_the_reader_and_the_engine_list_equal_records(
    sqlite_store: SQLStore,
    specs: list[tuple[str, dict[str, Any]]],
    plan: list[tuple[int, list[tuple[Any, ...]]]],
    extra: list[Message],
) -> None:
    assert sqlite_store.reader is not None
    sessions = [uuid.uuid4().hex, uuid.uuid4().hex]
    runs = [
        Run(sqlite_store, spec, session_id=sessions[session], agent_id=agent)
        for spec, (session, agent) in zip(specs, CONVERSATIONS, strict=True)
    ]
    for agent, spec, opening in OPENINGS:
        runs.append(Run(sqlite_store, spec, session_id=sessions[1], agent_id=agent))
        for step in opening:
            runs[-1].run(step)
    last = sqlite_store.reductions(sessions[1], "notes")[-1]
    runs[-1].conv.undo(last.reduction_id)
    if extra:
        runs[0].append(*extra)
    conversations = [(run.session_id, run.agent_id) for run in runs]
    for index, steps in plan:
        for step in steps:
            runs[index].run(step)
        calls = _listings(sqlite_store, conversations)
        listed = [getattr(sqlite_store, name)(*args, **kwargs) for name, args, kwargs in calls]
        assert listed == _on_the_engine(sqlite_store, calls)
