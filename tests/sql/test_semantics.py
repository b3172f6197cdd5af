"""The SQL store behaves exactly like the memory store (the reference), op for op.

A mirror store commits every changeset a :class:`Conversation` makes to both, checks
they accept or reject it alike, and the queries are compared after every step. Ops are
drawn from a seeded random sequence: appends (with tool pairs and binary content),
pins, evictions, summaries of messages and of earlier summaries, revisions, model
calls, agent state, and changesets that must be rejected.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from contextledger import Changeset, ContentRevision, Message, ReductionPlan, SummaryDraft, ViewEntry
from contextledger.conversation.conversation import Conversation
from contextledger.errors import ContextLedgerError, DuplicateEntry, EntryNotFound
from contextledger.model.records import Snapshot
from contextledger.stores.memory import MemoryStore
from contextledger.stores.sql import SQLStore


class Mirror:
    """Reads from the reference; commits to both and insists they agree."""

    url = "mirror://"

    def __init__(self, reference: MemoryStore, store: SQLStore) -> None:
        self.reference = reference
        self.store = store
        self.commits = 0
        self.rejections = 0

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        return self.reference.load(session_id, agent_id)

    def commit(self, changeset: Changeset) -> int:
        outcomes: list[int | type[ContextLedgerError]] = []
        for target in (self.reference, self.store):
            try:
                outcomes.append(target.commit(changeset))
            except ContextLedgerError as exc:
                outcomes.append(type(exc))
        assert outcomes[0] == outcomes[1], f"memory -> {outcomes[0]}, sql -> {outcomes[1]} for {changeset!r}"
        if isinstance(outcomes[0], type):
            self.rejections += 1
            raise outcomes[0](f"rejected by both stores: {changeset.session_id}")
        self.commits += 1
        return int(outcomes[0])


def _drop(records: list[Any], *fields: str) -> list[dict[str, Any]]:
    return [r.model_dump(exclude=set(fields)) for r in records]


def assert_same(reference: MemoryStore, store: SQLStore, session_id: str, agents: list[str]) -> None:
    assert store.agents(session_id) == reference.agents(session_id)
    for agent in agents:
        ref, got = reference.load(session_id, agent), store.load(session_id, agent)
        assert (ref is None) == (got is None)
        if ref is not None and got is not None:
            assert got.entries == ref.entries
            assert got.state.model_dump(exclude={"created_at", "updated_at"}) == ref.state.model_dump(
                exclude={"created_at", "updated_at"}
            )
        for include in (True, False):
            assert _drop(store.history(session_id, agent, include_evicted=include), "created_at") == _drop(
                reference.history(session_id, agent, include_evicted=include), "created_at"
            )
        assert _drop(store.revisions(session_id, agent), "created_at") == _drop(
            reference.revisions(session_id, agent), "created_at"
        )
        assert store.evictions(session_id, agent) == reference.evictions(session_id, agent)
        assert store.reductions(session_id, agent) == reference.reductions(session_id, agent)
        assert store.summaries(session_id, agent) == reference.summaries(session_id, agent)
    assert store.evictions(session_id) == reference.evictions(session_id)
    for trigger in ("manual", "reactive", "per_turn"):
        assert store.evictions(session_id, trigger=trigger) == reference.evictions(session_id, trigger=trigger)
    assert store.summaries(session_id) == reference.summaries(session_id)
    assert _drop(store.sessions(), "created_at", "updated_at") == _drop(
        reference.sessions(), "created_at", "updated_at"
    )


def _random_messages(rng: random.Random, n: int) -> list[Message]:
    out: list[Message] = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.2:
            tool = f"t{rng.randrange(10**9)}"
            out += [
                Message.tool_use(tool, "lookup", {"q": rng.random()}),
                Message.tool_result(tool, "r" * rng.randrange(1, 300)),
            ]
        elif kind < 0.3:
            image = {"image": {"format": "png", "source": {"bytes": rng.randbytes(16)}}}
            out.append(Message(role="user", content=[{"text": "img"}, image]))
        elif kind < 0.4:
            out.append(Message.user(f"pinned {rng.random()}").with_pin(True))
        else:
            role = rng.choice(["user", "assistant"])
            out.append(Message.text(role, f"{role} {rng.random()} " * rng.randrange(1, 5)))  # type: ignore[arg-type]
    return out


def _step(rng: random.Random, conv: Conversation) -> None:
    view = conv.view
    ids = view.ids
    messages = [e.entry_id for e in view if e.kind == "message"]
    op = rng.random()
    if op < 0.35 or len(ids) < 3:
        conv.append(*_random_messages(rng, rng.randrange(1, 4)))
    elif op < 0.45 and messages:
        conv.pin(rng.choice(messages)) if rng.random() < 0.6 else conv.unpin(rng.choice(messages))
    elif op < 0.6:
        victims = tuple(rng.sample(ids, rng.randrange(1, min(4, len(ids)))))
        conv.apply_plan(
            lambda v: ReductionPlan(strategy="sliding_window", evict=victims), trigger="per_turn", as_given=True
        )
    elif op < 0.72:
        replaced = tuple(ids[: rng.randrange(1, min(5, len(ids)))])
        extra = tuple(i for i in ids[len(replaced) : len(replaced) + 1] if rng.random() < 0.3)
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing",
                evict=extra,
                summary=SummaryDraft(content=f"summary {rng.random()}", summarizer="extractive", replaces=replaced),
            ),
            trigger=rng.choice(["proactive", "reactive"]),
            error=RuntimeError("overflow") if rng.random() < 0.5 else None,
            as_given=True,  # store equivalence over any plan, not the view rules
        )
    elif op < 0.82 and messages:
        target = rng.choice(messages)
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="sliding_window",
                revisions=(ContentRevision(message_id=target, content=[{"text": f"cut {rng.random()}"}]),),
            ),
            trigger="reactive",
        )
    elif op < 0.88:
        conv.before_model_call()
    elif op < 0.92:
        conv.set_agent_state({"step": rng.randrange(100), "nested": {"ok": [1, None, "\x00"]}})
    else:
        _rejected(rng, conv)


def _rejected(rng: random.Random, conv: Conversation) -> None:
    """Changesets both stores must refuse, leaving everything as it was."""
    state = conv.state
    messages = [e for e in conv.view if e.kind == "message"]
    choice = rng.randrange(3)
    if choice == 0 and messages:
        dup = messages[0]
        changeset = Changeset(
            session_id=state.session_id,
            agent_id=state.agent_id,
            expected_version=state.version,
            appends=(ViewEntry(entry_id=dup.entry_id, seq=state.next_seq, message=dup.message),),
            next_seq=state.next_seq + 1,
        )
        expected: type[Exception] = DuplicateEntry
    else:
        summaries = [e.entry_id for e in conv.view if e.kind == "summary"]
        new = Message.user("riding along")
        changeset = Changeset(
            session_id=state.session_id,
            agent_id=state.agent_id,
            expected_version=state.version,
            appends=(ViewEntry(entry_id=new.message_id, seq=state.next_seq, message=new),),
            next_seq=state.next_seq + 1,
            pins={rng.choice(summaries) if summaries and choice == 1 else "missing": True},
        )
        expected = EntryNotFound
    with pytest.raises(expected):
        conv.store.commit(changeset)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sql_store_matches_the_memory_store(sql_store: SQLStore, seed: int) -> None:
    rng = random.Random(seed)
    reference = MemoryStore()
    mirror = Mirror(reference, sql_store)
    agents = ["alpha", "beta"]
    conversations = {a: Conversation(mirror, "s", a) for a in agents}  # type: ignore[arg-type]
    for step in range(120):
        _step(rng, conversations[rng.choice(agents)])
        if step % 10 == 9:
            assert_same(reference, sql_store, "s", agents)
    assert_same(reference, sql_store, "s", agents)
    assert mirror.commits > 80
    assert mirror.rejections > 0
    assert any(s.status == "evicted" and s.superseded_by for s in sql_store.summaries("s"))
    assert sql_store.revisions("s", "alpha") or sql_store.revisions("s", "beta")
    # Restoring from the SQL store gives the live view, pins and counts included.
    for agent, live in conversations.items():
        restored = Conversation(sql_store, "s", agent)
        assert list(restored.view.entries) == list(live.view.entries)
        assert restored.model_call_count == live.model_call_count
        assert restored.agent_state == live.agent_state
    assert sql_store.delete_session("s") is True
    assert reference.delete_session("s") is True
    assert_same(reference, sql_store, "s", agents)
