"""Contract of the ``history`` capability: the listings over one session's rows.

Entries (evicted ones marked), evictions joined with their reductions and summaries,
reductions, summaries (superseded ones kept), revisions (originals kept), agents.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, ContentRevision, ReductionPlan, SummaryDraft
from contextledger.errors import EntryNotFound, InvalidMessage
from contextledger.model.messages import Message
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import HISTORY, Capability, CompleteStore
from contextledger.testing.declared import CapabilityContract
from contextledger.testing.required import create, edit_everything, entries_of, ids, reduction

__all__ = ["HistoryContract"]


class HistoryContract(CapabilityContract):
    """The listings, each read after the commits that wrote what it lists."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (HISTORY,)

    def test_listings_of_an_unknown_conversation_are_empty(self, store: CompleteStore) -> None:
        assert store.load("nope", "a") is None
        assert store.history("nope", "a") == []
        assert store.agents("nope") == []

    def test_history_holds_content_losslessly(self, store: CompleteStore) -> None:
        msg = Message(
            role="user",
            content=[
                {"text": "héllo ✓ \x00"},
                {"image": {"format": "png", "source": {"bytes": bytes(range(256))}}},
                {"document": {"format": "pdf", "name": "d", "source": {"bytes": b"%PDF\xff"}}},
                {"reasoningContent": {"reasoningText": {"text": "why", "signature": "sig"}}},
                {"cachePoint": {"type": "default"}},
                {"someFutureBlock": {"nested": [1, 2.5, None, True, {"k": "v"}]}},
            ],
            metadata={"usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}, "custom": {"x": [1]}},
        )
        create(store, "s", [msg])
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.entries[0].message == msg
        assert store.history("s", "a")[0].message == msg

    @pytest.mark.parametrize(
        "bad",
        ["set", "object", "nan", "infinity", "revision", "agent_state", "manager_state"],
    )
    def test_a_rejected_value_leaves_no_row(self, store: CompleteStore, bad: str) -> None:
        msgs = [Message.user("a"), Message.user("b")]
        create(store, "s", msgs)
        before = store.load("s", "a")
        payload: dict[str, object] = {
            "set": {1, 2},
            "object": object(),
            "nan": float("nan"),
            "infinity": {"x": float("inf")},
        }
        fields: dict[str, object] = {"session_id": "s", "agent_id": "a", "expected_version": 1, "next_seq": 3}
        if bad in payload:
            odd = Message(role="user", content=[{"json": payload[bad]}])
            fields["appends"] = entries_of([odd], 2)
        elif bad == "revision":
            fields["revisions"] = (ContentRevision(message_id=msgs[0].message_id, content=[{"json": float("nan")}]),)
            fields["reduction"] = reduction("s", revised=(msgs[0].message_id,))
        else:
            fields[bad] = {"manager": "x", "value": float("nan")} if bad == "manager_state" else {"k": object()}
        with pytest.raises(InvalidMessage, match="JSON"):
            store.commit(Changeset.model_validate(fields))
        assert store.load("s", "a") == before
        assert len(store.history("s", "a")) == 2
        assert store.reductions("s") == []
        assert store.revisions("s", "a") == []

    def test_agents_are_listed_sorted(self, store: CompleteStore) -> None:
        create(store, "s", [Message.user("a1")], agent_id="a")
        create(store, "s", [Message.user("b1"), Message.user("b2")], agent_id="b")
        assert store.agents("s") == ["a", "b"]
        assert len(ids(store, "s", "a")) == 1
        assert len(ids(store, "s", "b")) == 2

    def test_eviction_keeps_history(self, store: CompleteStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(4)]
        create(store, "s", msgs)
        red = reduction("s", trigger="per_turn", strategy="sliding_window", evicted=(msgs[0].message_id,))
        store.commit(
            Changeset(session_id="s", agent_id="a", expected_version=1, evict=(msgs[0].message_id,), reduction=red)
        )
        assert ids(store, "s") == [m.message_id for m in msgs[1:]]
        history = store.history("s", "a")
        assert [h.message.message_id for h in history] == [m.message_id for m in msgs]
        assert history[0].status == "evicted"
        assert history[0].evicted_by == red.reduction_id
        assert [h.status for h in history[1:]] == ["active"] * 3
        assert len(store.history("s", "a", include_evicted=False)) == 3
        (ev,) = store.evictions("s")
        assert ev.entry_id == msgs[0].message_id
        assert ev.trigger == "per_turn"
        assert ev.strategy == "sliding_window"
        assert ev.reduction_id == red.reduction_id
        assert ev.preview == "m0"
        assert [r.reduction_id for r in store.reductions("s")] == [red.reduction_id]

    def test_a_rejected_eviction_leaves_no_reduction(self, store: CompleteStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(3)]
        create(store, "s", msgs)
        red = reduction("s")
        bad = Changeset(
            session_id="s",
            agent_id="a",
            expected_version=1,
            appends=entries_of([Message.user("new")], 3),
            evict=(msgs[0].message_id, "no-such-entry"),
            reduction=red,
            next_seq=4,
            model_call_count=9,
        )
        with pytest.raises(EntryNotFound):
            store.commit(bad)
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.state.version == 1
        assert snap.state.model_call_count == 0
        assert [e.entry_id for e in snap.entries] == [m.message_id for m in msgs]
        assert store.reductions("s") == []

    def test_summaries_chain_and_supersede(self, store: CompleteStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(6)]
        conv = Conversation(store, "s", "a")
        conv.append(*msgs)
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing",
                summary=SummaryDraft(content="S1", summarizer="t", replaces=tuple(v.ids[:3])),
            ),
            trigger="proactive",
        )
        first = conv.view[0]
        assert first.kind == "summary"
        assert first.message.plain_text == "S1"
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing",
                summary=SummaryDraft(content="S2", summarizer="t", replaces=tuple(v.ids[:2])),
            ),
            trigger="reactive",
            error=RuntimeError("overflow"),
        )
        snap = store.load("s", "a")
        assert snap is not None
        assert [e.kind for e in snap.entries] == ["summary", "message", "message"]
        assert snap.entries[0].message.plain_text == "S2"
        s1, s2 = store.summaries("s")
        assert (s1.content, s2.content) == ("S1", "S2")
        assert s1.status == "evicted"
        assert s1.superseded_by == s2.summary_id
        assert s2.supersedes == s1.summary_id
        assert s2.replaces == (s1.summary_id, msgs[3].message_id)
        assert s1.replaces == tuple(m.message_id for m in msgs[:3])
        evictions = {e.entry_id: e for e in store.evictions("s")}
        assert set(evictions) == {m.message_id for m in msgs[:4]} | {s1.summary_id}
        assert evictions[msgs[0].message_id].replaced_by_summary == s1.summary_id
        assert evictions[msgs[3].message_id].replaced_by_summary == s2.summary_id
        assert evictions[s1.summary_id].kind == "summary"
        assert evictions[s1.summary_id].replaced_by_summary == s2.summary_id
        assert evictions[s1.summary_id].trigger == "reactive"
        assert evictions[s1.summary_id].error == "RuntimeError: overflow"
        assert [e.entry_id for e in store.evictions("s", trigger="proactive")] == [m.message_id for m in msgs[:3]]
        assert list(snap.entries) == list(conv.view.entries)

    def test_revision_keeps_original(self, store: CompleteStore) -> None:
        result = Message.tool_result("t1", "x" * 500)
        msgs = [Message.tool_use("t1", "read", {"p": 1}), result]
        conv = Conversation(store, "s", "a")
        conv.append(*msgs)
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="sliding_window",
                revisions=(ContentRevision(message_id=result.message_id, content=[{"text": "short"}]),),
            ),
            trigger="reactive",
        )
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.entries[1].message.content == [{"text": "short"}]
        assert snap.entries[1].tokens < 100
        (rev,) = store.revisions("s", "a")
        assert rev.message_id == result.message_id
        assert rev.number == 1
        assert rev.original == result.to_record()["content"]
        assert store.history("s", "a")[1].revision_count == 1
        assert list(snap.entries) == list(conv.view.entries)

    def test_pins_show_in_the_history(self, store: CompleteStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(3)]
        conv = Conversation(store, "s", "a")
        conv.append(*msgs)
        conv.pin(msgs[1].message_id)
        snap = store.load("s", "a")
        assert snap is not None
        assert [e.pinned for e in snap.entries] == [False, True, False]
        assert store.history("s", "a")[1].pinned is True
        conv.unpin(msgs[1].message_id)
        snap = store.load("s", "a")
        assert snap is not None
        assert [e.pinned for e in snap.entries] == [False, False, False]
        with pytest.raises(EntryNotFound):
            store.commit(Changeset(session_id="s", agent_id="a", expected_version=conv.version, pins={"zzz": True}))

    def test_eviction_filters(self, store: CompleteStore) -> None:
        conv = Conversation(store, "s", "a")
        msgs = [Message.user(f"m{i}") for i in range(4)]
        conv.append(*msgs)
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="per_turn")
        time.sleep(0.02)
        cut = utcnow()
        time.sleep(0.02)
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="proactive")
        other = Conversation(store, "s", "b")
        other.append(Message.user("b0"), Message.user("b1"))
        other.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="per_turn")
        assert len(store.evictions("s")) == 3
        assert len(store.evictions("s", "a")) == 2
        assert [e.entry_id for e in store.evictions("s", "a", trigger="per_turn")] == [msgs[0].message_id]
        assert [e.entry_id for e in store.evictions("s", since=cut, agent_id="a")] == [msgs[1].message_id]
        assert store.evictions("s", since=utcnow() + timedelta(seconds=5)) == []
        # A naive datetime means UTC.
        assert store.evictions("s", "a", since=cut.replace(tzinfo=None)) == store.evictions("s", "a", since=cut)
        assert len(store.reductions("s")) == 3
        assert len(store.reductions("s", "b")) == 1

    def test_an_edit_is_one_reduction_row(self, store: CompleteStore) -> None:
        _, msgs = edit_everything(store)
        (red,) = store.reductions("s")
        assert set(red.evicted) == {m.message_id for m in msgs[:3]}
        assert (red.messages_before, red.messages_after) == (5, 3)
