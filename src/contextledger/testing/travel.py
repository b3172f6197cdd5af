"""Contract: time travel and undo commit and read the same way on every store."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.errors import InvalidPlan, ModelCallNotFound, ReductionNotFound, UndoConflict
from contextledger.history.travel import view_at
from contextledger.model.messages import Message
from contextledger.model.records import Reduction
from contextledger.stores.capabilities import ERASURE, HISTORY, LINEAGE, SCOPES, TIME_TRAVEL, Capability, CompleteStore
from contextledger.testing.declared import CapabilityContract

__all__ = ["TimeTravelContract"]


def _texts(view: object) -> list[str]:
    return [e.message.plain_text for e in view]  # type: ignore[attr-defined]


def _chat(count: int) -> list[Message]:
    return [Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(count)]


def _summary_chain(conv: Conversation, msgs: list[Message]) -> tuple[Reduction, Reduction, list[str]]:
    """Two summaries, the second superseding the first; also the view texts between them."""
    first = conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s1", summary=SummaryDraft(content="one", summarizer="x", replaces=(msgs[0].message_id,))
        ),
        trigger="manual",
    )
    assert first is not None
    assert first.summary_id is not None
    summary_id = first.summary_id
    middle = _texts(conv.view)
    second = conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s2",
            summary=SummaryDraft(content="two", summarizer="x", replaces=(summary_id, msgs[1].message_id)),
        ),
        trigger="manual",
    )
    assert second is not None
    return first, second, middle


class TimeTravelContract(CapabilityContract):
    """Call stamps, entries by id, past views, and undo as one reduction of its own."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (TIME_TRAVEL, HISTORY, SCOPES, LINEAGE, ERASURE)

    def test_entries_by_id_carry_their_stamps(self, store: CompleteStore) -> None:
        """Entries by id carry their stamps."""
        conv = Conversation(store, "s", "a")
        first = _chat(2)
        conv.append(*first)
        conv.before_model_call()
        (late,) = conv.append(Message.assistant("late"))
        rows = store.entries("s", "a", [late.message_id, first[0].message_id, "missing"])
        assert [r.message.message_id for r in rows] == [first[0].message_id, late.message_id]
        assert [(r.from_call, r.version) for r in rows] == [(1, 1), (2, 3)]
        assert store.entries("s", "a", []) == []
        assert store.entries("nope", "a", [late.message_id]) == []

    def test_view_at_rewinds_evictions_summaries_and_pins(self, store: CompleteStore) -> None:
        """View at rewinds evictions summaries and pins."""
        conv = Conversation(store, "s", "a")
        msgs = _chat(6)
        conv.append(*msgs)
        conv.pin(msgs[2].message_id)
        conv.before_model_call()
        seen = _texts(conv.view)
        plan = ReductionPlan(
            strategy="t", summary=SummaryDraft(content="sum", summarizer="x", replaces=(msgs[0].message_id,))
        )
        conv.apply_plan(lambda _v: plan, trigger="manual")
        conv.unpin(msgs[2].message_id)
        conv.before_model_call()
        assert _texts(view_at(store, "s", "a", model_call=1)) == seen
        assert view_at(store, "s", "a", model_call=1)[2].pinned
        assert _texts(view_at(store, "s", "a", model_call=2)) == ["sum", *seen[1:]]
        assert not view_at(store, "s", "a", model_call=2)[2].pinned
        with pytest.raises(ModelCallNotFound):
            view_at(store, "s", "a", model_call=3)

    def test_undo_restores_and_is_recorded(self, store: CompleteStore) -> None:
        """Undo restores and is recorded."""
        conv = Conversation(store, "s", "a")
        msgs = _chat(6)
        conv.append(*msgs)
        before = _texts(conv.view)
        plan = ReductionPlan(
            strategy="summarizing",
            summary=SummaryDraft(content="nonsense", summarizer="x", replaces=(msgs[0].message_id, msgs[1].message_id)),
        )
        reduction = conv.apply_plan(lambda _v: plan, trigger="manual")
        assert reduction is not None
        version = conv.version
        undo = conv.undo(reduction.reduction_id)
        assert conv.version == version + 1
        assert _texts(conv.view) == before
        assert (undo.strategy, undo.trigger) == ("undo", "manual")
        assert set(undo.restored) == {msgs[0].message_id, msgs[1].message_id}
        assert undo.evicted == (reduction.summary_id,)
        assert [r.strategy for r in store.reductions("s", "a")] == ["summarizing", "undo"]
        assert _texts(Conversation(store, "s", "a").view) == before  # what a restart reads
        (summary,) = store.summaries("s", "a")
        assert summary.status == "evicted"
        with pytest.raises(UndoConflict):
            conv.undo(reduction.reduction_id)  # already undone: the undo depends on it
        with pytest.raises(ReductionNotFound):
            conv.undo("missing")

    def test_undo_refuses_a_reduction_others_depend_on_unless_cascade(self, store: CompleteStore) -> None:
        """Undo refuses a reduction others depend on unless cascade."""
        conv = Conversation(store, "s", "a")
        msgs = _chat(8)
        conv.append(*msgs)
        before = _texts(conv.view)
        first, second, _ = _summary_chain(conv, msgs)
        version = conv.version
        with pytest.raises(UndoConflict) as info:
            conv.undo(first.reduction_id)
        assert info.value.dependents == (second.reduction_id,)
        assert conv.version == version
        assert store.load("s", "a").state.version == version  # type: ignore[union-attr]
        undo = conv.undo(first.reduction_id, cascade=True)
        assert _texts(conv.view) == before
        assert undo.detail is not None
        assert second.reduction_id in undo.detail

    def test_undo_of_the_newest_reduction_leaves_the_superseded_summary(self, store: CompleteStore) -> None:
        """Undo of the newest reduction leaves the superseded summary."""
        conv = Conversation(store, "s", "a")
        msgs = _chat(8)
        conv.append(*msgs)
        first, second, middle = _summary_chain(conv, msgs)
        conv.undo(second.reduction_id)
        assert _texts(conv.view) == middle
        by_id = {s.summary_id: s for s in store.summaries("s", "a")}
        assert by_id[str(first.summary_id)].status == "active"
        assert by_id[str(first.summary_id)].superseded_by is None

    def test_undo_reverts_revisions_and_view_at_sees_both_sides(self, store: CompleteStore) -> None:
        """Undo reverts revisions and view at sees both sides."""
        from contextledger.core.changeset import ContentRevision

        conv = Conversation(store, "s", "a")
        (msg,) = conv.append(Message.user("long " * 20))
        conv.append(Message.assistant("ok"))
        conv.before_model_call()
        revise = conv.apply_plan(
            lambda _v: ReductionPlan(
                strategy="t", revisions=(ContentRevision(message_id=msg.message_id, content=[{"text": "short"}]),)
            ),
            trigger="manual",
        )
        assert revise is not None
        conv.before_model_call()
        conv.undo(revise.reduction_id)
        conv.before_model_call()
        assert conv.view[0].message.plain_text == msg.plain_text
        assert [v[0].message.plain_text for v in (view_at(store, "s", "a", model_call=n) for n in (1, 2, 3))] == [
            msg.plain_text,
            "short",
            msg.plain_text,
        ]
        assert len(store.revisions("s", "a", msg.message_id)) == 2

    def test_an_undo_breaking_the_view_rules_is_refused(self, store: CompleteStore) -> None:
        """An undo breaking the view rules is refused."""
        conv = Conversation(store, "s", "a")
        use, result = Message.tool_use("t1", "f", {}), Message.tool_result("t1", "r")
        conv.append(Message.user("go"), use, result, Message.assistant("done"), Message.user("next"))
        # Plans taken as given (apply_plan does not enforce the rules): the first evicts the
        # result alone, the second the call; undoing the first alone would orphan the result.
        split = conv.apply_plan(
            lambda _v: ReductionPlan(strategy="raw", evict=(result.message_id,)), trigger="manual", as_given=True
        )
        assert split is not None
        conv.apply_plan(
            lambda _v: ReductionPlan(strategy="raw", evict=(use.message_id,)), trigger="manual", as_given=True
        )
        version = conv.version
        with pytest.raises(InvalidPlan, match="toolResult"):
            conv.undo(split.reduction_id)
        assert store.load("s", "a").state.version == version  # type: ignore[union-attr]

    def test_fork_starts_from_the_view_at_a_call_and_records_its_origin(self, store: CompleteStore) -> None:
        """Fork starts from the view at a call and records its origin."""
        from contextledger.history.fork import fork, fork_origin

        conv = Conversation(store, "s", "a")
        msgs = _chat(6)
        conv.append(*msgs)
        conv.pin(msgs[2].message_id)
        conv.apply_plan(
            lambda _v: ReductionPlan(
                strategy="t", summary=SummaryDraft(content="sum", summarizer="x", replaces=(msgs[0].message_id,))
            ),
            trigger="manual",
        )
        conv.before_model_call()
        at_one = _texts(conv.view)
        conv.append(Message.assistant("later"))
        conv.apply_plan(lambda _v: ReductionPlan(strategy="t", evict=(msgs[1].message_id,)), trigger="manual")
        conv.before_model_call()
        (origin,) = fork(store, "s", "f", at_call=1)
        assert (origin.session_id, origin.agent_id, origin.at_call) == ("s", "a", 1)
        branch = Conversation(store, "f", "a")
        assert _texts(branch.view) == at_one
        assert branch.view[2].pinned
        assert branch.version == 1
        assert branch.model_call_count == 1
        assert {h.message.message_id for h in store.history("f", "a")} == {m.message_id for m in msgs}
        recorded = fork_origin(store.reductions("f", "a"))
        assert recorded is not None
        assert (recorded.session_id, recorded.at_call) == ("s", 1)
        assert fork_origin(store.reductions("s", "a")) is None
        branch.append(Message.user("another way"))  # the fork goes on on its own
        assert _texts(Conversation(store, "s", "a").view)[-1] == "later"
        (now,) = fork(store, "s", "g")
        assert _texts(Conversation(store, "g", "a").view) == _texts(conv.view)
        assert now.at_call is None
