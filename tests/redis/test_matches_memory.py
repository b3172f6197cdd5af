"""The Redis store answers exactly as the reference memory store for the same changesets.

A random sequence of edits is driven through a :class:`Conversation` on the memory
store; every changeset it commits is replayed on Redis (single server and Cluster), and
every read of the store protocol is compared. Only the commit-time clocks differ.
"""

from __future__ import annotations

import contextlib
import uuid
from functools import partial
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, ContentRevision, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import PinError
from contextledger.model.messages import Message
from contextledger.stores.memory import MemoryStore
from contextledger.stores.redis import RedisStore
from tests.redis.conftest import Backend
from tests.soak import examples


class Recording(MemoryStore):
    """A memory store that keeps every changeset it committed."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Changeset] = []

    def commit(self, changeset: Changeset) -> int:
        version = super().commit(changeset)
        self.log.append(changeset)
        return version


def _message(kind: int, n: int) -> list[Message]:
    if kind == 0:
        return [Message.user(f"question {n}", metadata={"custom": {"tag": n}} if n % 3 == 0 else {})]
    if kind == 1:
        return [Message.assistant(f"answer {n} ✓")]
    tool = f"tool-{n}"
    return [
        Message.tool_use(tool, "read", {"path": f"/f{n}", "n": [n, 1.5, None]}),
        Message.tool_result(
            tool,
            [{"text": "x" * (n * 7 % 90)}, {"image": {"format": "png", "source": {"bytes": bytes([n % 256, 0, 255])}}}],
        ),
    ]


operation = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2)),
    st.tuples(st.just("pin"), st.integers(0, 30)),
    st.tuples(st.just("unpin"), st.integers(0, 30)),
    st.tuples(st.just("evict"), st.integers(0, 30)),
    st.tuples(st.just("summarize"), st.integers(1, 4)),
    st.tuples(st.just("revise"), st.integers(0, 30)),
    st.tuples(st.just("call"), st.just(0)),
    st.tuples(st.just("state"), st.integers(0, 9)),
)


def _run(conv: Conversation, ops: list[tuple[str, int]]) -> None:
    for n, (name, arg) in enumerate(ops):
        size = len(conv.view)
        if name == "append":
            conv.append(*_message(arg, n))
        elif name in ("pin", "unpin") and size:
            with contextlib.suppress(PinError):  # a summary cannot be pinned
                conv.pin_index(arg % size, name == "pin")
        elif name == "evict" and size:
            victim = conv.view[arg % size].entry_id
            conv.apply_plan(partial(_evict, victim), trigger="per_turn", as_given=True)
        elif name == "summarize" and size >= arg:
            conv.apply_plan(
                partial(_summarize, arg, f"summary {n}"),
                trigger="proactive",
                error=RuntimeError("overflow") if n % 2 else None,
                as_given=True,  # store equivalence over any plan, not the view rules
            )
        elif name == "revise" and size:
            entry = conv.view[arg % size]
            if entry.kind == "message":
                revision = ContentRevision(message_id=entry.entry_id, content=[{"text": f"cut {n}"}])
                conv.apply_plan(partial(_revise, revision), trigger="reactive")
        elif name == "call":
            conv.before_model_call()
        elif name == "state":
            conv.set_agent_state({"step": arg, "nested": {"k": [arg]}})


def _evict(victim: str, view: View) -> ReductionPlan:
    return ReductionPlan(strategy="w", evict=(victim,))


def _summarize(count: int, text: str, view: View) -> ReductionPlan:
    return ReductionPlan(
        strategy="summarizing", summary=SummaryDraft(content=text, summarizer="t", replaces=tuple(view.ids[:count]))
    )


def _revise(revision: ContentRevision, view: View) -> ReductionPlan:
    return ReductionPlan(strategy="trim", revisions=(revision,))


def _without(record: Any, *names: str) -> dict[str, Any]:
    dumped: dict[str, Any] = record.model_dump(exclude=set(names))
    return dumped


def _compare(memory: MemoryStore, redis_store: RedisStore, sid: str) -> None:
    mem, red = memory.load(sid, "a"), redis_store.load(sid, "a")
    assert (mem is None) == (red is None)
    if mem is None or red is None:
        return
    assert red.entries == mem.entries
    assert _without(red.state, "created_at", "updated_at") == _without(mem.state, "created_at", "updated_at")
    assert [_without(h, "created_at") for h in redis_store.history(sid, "a")] == [
        _without(h, "created_at") for h in memory.history(sid, "a")
    ]
    assert [h.message for h in redis_store.history(sid, "a")] == [h.message for h in memory.history(sid, "a")]
    assert redis_store.evictions(sid) == memory.evictions(sid)
    assert redis_store.evictions(sid, "a", trigger="proactive") == memory.evictions(sid, "a", trigger="proactive")
    assert redis_store.reductions(sid) == memory.reductions(sid)
    assert redis_store.summaries(sid) == memory.summaries(sid)
    assert [_without(r, "created_at") for r in redis_store.revisions(sid, "a")] == [
        _without(r, "created_at") for r in memory.revisions(sid, "a")
    ]
    assert redis_store.agents(sid) == memory.agents(sid)
    (mine,) = [s for s in redis_store.sessions(limit=1000) if s.session_id == sid]
    (theirs,) = memory.sessions()
    assert _without(mine, "created_at", "updated_at") == _without(theirs, "created_at", "updated_at")


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operation, min_size=1, max_size=25))
def test_replayed_changesets_read_back_as_in_memory(backend: Backend, ops: list[tuple[str, int]]) -> None:
    memory = Recording()
    sid = f"s-{uuid.uuid4().hex[:8]}"
    _run(Conversation(memory, sid, "a"), ops)
    for changeset in memory.log:
        assert backend.store.commit(changeset) == changeset.new_version
    _compare(memory, backend.store, sid)
    assert backend.store.delete_session(sid) is bool(memory.log)
