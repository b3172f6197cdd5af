"""The store contract: behaviour every ledger store must show, memory included.

Subclass :class:`StoreContract` in a test module where a ``store`` fixture yields a
fresh, empty :class:`~contextledger.stores.base.LedgerStore`, and a ``lost_reply``
fixture yields a :class:`~contextledger.testing.exactly_once.LostReply` (a fresh store
whose commits can lose their reply).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from contextledger.conversation.conversation import Conversation, Edit
from contextledger.core.changeset import Changeset, ContentRevision, ReductionPlan, SummaryDraft
from contextledger.errors import ConcurrencyConflict, ConfigurationError, DuplicateEntry, EntryNotFound, InvalidMessage
from contextledger.model.messages import Message
from contextledger.model.records import Reduction, ViewEntry, utcnow
from contextledger.stores.base import LedgerStore
from contextledger.testing.encryption import EncryptionContract
from contextledger.testing.exactly_once import ExactlyOnceContract
from contextledger.testing.lifecycle import LifecycleContract, PinHistoryContract
from contextledger.testing.lineage import ExpiryContract, LineageContract
from contextledger.testing.owners import OwnersContract
from contextledger.testing.paging import KeyedPagingContract, PagingContract
from contextledger.testing.retention import RetentionContract
from contextledger.testing.transfer import TransferContract
from contextledger.testing.travel import TimeTravelContract

__all__ = ["StoreContract"]


def _entries(messages: list[Message], start: int = 0) -> tuple[ViewEntry, ...]:
    return tuple(
        ViewEntry(entry_id=m.message_id, seq=start + i, message=m, tokens=10 + i) for i, m in enumerate(messages)
    )


def _reduction(session_id: str, agent_id: str = "a", **kw: object) -> Reduction:
    fields: dict[str, object] = {
        "session_id": session_id,
        "agent_id": agent_id,
        "trigger": "manual",
        "strategy": "test",
        "messages_before": 0,
        "messages_after": 0,
        "tokens_before": 0,
        "tokens_after": 0,
    }
    fields.update(kw)
    return Reduction.model_validate(fields)


def _create(store: LedgerStore, session_id: str, messages: list[Message], agent_id: str = "a") -> int:
    return store.commit(
        Changeset(
            session_id=session_id,
            agent_id=agent_id,
            expected_version=0,
            appends=_entries(messages),
            next_seq=len(messages),
        )
    )


def _ids(store: LedgerStore, session_id: str, agent_id: str = "a") -> list[str]:
    snapshot = store.load(session_id, agent_id)
    assert snapshot is not None
    return [e.entry_id for e in snapshot.entries]


class StoreContract(
    PagingContract,
    KeyedPagingContract,
    OwnersContract,
    EncryptionContract,
    LineageContract,
    ExpiryContract,
    TransferContract,
    RetentionContract,
    TimeTravelContract,
    PinHistoryContract,
    LifecycleContract,
    ExactlyOnceContract,
):
    """The contract suite.

    Requires a ``store`` fixture yielding a fresh empty store, and a ``lost_reply``
    fixture for the exactly-once tests (see :mod:`contextledger.testing.exactly_once`).
    """

    # -- state and appends ---------------------------------------------------------------

    def test_load_unknown_is_none(self, store: LedgerStore) -> None:
        assert store.load("nope", "a") is None
        assert store.history("nope", "a") == []
        assert store.agents("nope") == []

    def test_create_and_load_in_order(self, store: LedgerStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(5)]
        assert _create(store, "s", msgs) == 1
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.state.version == 1
        assert snap.state.next_seq == 5
        assert [e.message for e in snap.entries] == msgs
        assert [e.tokens for e in snap.entries] == [10, 11, 12, 13, 14]
        assert [e.seq for e in snap.entries] == [0, 1, 2, 3, 4]

    def test_content_round_trips_losslessly(self, store: LedgerStore) -> None:
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
        _create(store, "s", [msg])
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.entries[0].message == msg
        assert store.history("s", "a")[0].message == msg

    def test_stale_version_conflicts_and_changes_nothing(self, store: LedgerStore) -> None:
        _create(store, "s", [Message.user("a")])
        stale = Changeset(
            session_id="s", agent_id="a", expected_version=0, appends=_entries([Message.user("b")], 1), next_seq=2
        )
        with pytest.raises(ConcurrencyConflict):
            store.commit(stale)
        with pytest.raises(ConcurrencyConflict):
            store.commit(stale.model_copy(update={"expected_version": 5}))
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.state.version == 1
        assert len(snap.entries) == 1

    def test_duplicate_append_rejected_atomically(self, store: LedgerStore) -> None:
        first = Message.user("a")
        _create(store, "s", [first])
        bad = Changeset(
            session_id="s",
            agent_id="a",
            expected_version=1,
            appends=_entries([Message.user("b"), first], 1),
            next_seq=3,
        )
        with pytest.raises(DuplicateEntry):
            store.commit(bad)
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.state.version == 1
        assert [e.entry_id for e in snap.entries] == [first.message_id]

    def test_state_fields_persist_and_none_keeps(self, store: LedgerStore) -> None:
        _create(store, "s", [Message.user("a")])
        store.commit(
            Changeset(
                session_id="s",
                agent_id="a",
                expected_version=1,
                model_call_count=7,
                manager_state={"manager": "x", "n": 1},
                agent_state={"k": ["v", 2]},
            )
        )
        store.commit(Changeset(session_id="s", agent_id="a", expected_version=2))
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.state.version == 3
        assert snap.state.model_call_count == 7
        assert snap.state.manager_state == {"manager": "x", "n": 1}
        assert snap.state.agent_state == {"k": ["v", 2]}

    @pytest.mark.parametrize(
        "bad",
        ["set", "object", "nan", "infinity", "revision", "agent_state", "manager_state"],
    )
    def test_value_json_cannot_hold_is_rejected_atomically(self, store: LedgerStore, bad: str) -> None:
        msgs = [Message.user("a"), Message.user("b")]
        _create(store, "s", msgs)
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
            fields["appends"] = _entries([odd], 2)
        elif bad == "revision":
            fields["revisions"] = (ContentRevision(message_id=msgs[0].message_id, content=[{"json": float("nan")}]),)
            fields["reduction"] = _reduction("s", revised=(msgs[0].message_id,))
        else:
            fields[bad] = {"manager": "x", "value": float("nan")} if bad == "manager_state" else {"k": object()}
        with pytest.raises(InvalidMessage, match="JSON"):
            store.commit(Changeset.model_validate(fields))
        assert store.load("s", "a") == before
        assert len(store.history("s", "a")) == 2
        assert store.reductions("s") == []
        assert store.revisions("s", "a") == []

    def test_agents_are_isolated(self, store: LedgerStore) -> None:
        _create(store, "s", [Message.user("a1")], agent_id="a")
        _create(store, "s", [Message.user("b1"), Message.user("b2")], agent_id="b")
        assert store.agents("s") == ["a", "b"]
        assert len(_ids(store, "s", "a")) == 1
        assert len(_ids(store, "s", "b")) == 2

    # -- reductions ----------------------------------------------------------------------

    def test_eviction_keeps_history(self, store: LedgerStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(4)]
        _create(store, "s", msgs)
        red = _reduction("s", trigger="per_turn", strategy="sliding_window", evicted=(msgs[0].message_id,))
        store.commit(
            Changeset(session_id="s", agent_id="a", expected_version=1, evict=(msgs[0].message_id,), reduction=red)
        )
        assert _ids(store, "s") == [m.message_id for m in msgs[1:]]
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

    def test_unknown_eviction_rejected_atomically(self, store: LedgerStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(3)]
        _create(store, "s", msgs)
        red = _reduction("s")
        bad = Changeset(
            session_id="s",
            agent_id="a",
            expected_version=1,
            appends=_entries([Message.user("new")], 3),
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

    def test_evicting_twice_is_rejected(self, store: LedgerStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(2)]
        _create(store, "s", msgs)
        red = _reduction("s")
        store.commit(
            Changeset(session_id="s", agent_id="a", expected_version=1, evict=(msgs[0].message_id,), reduction=red)
        )
        with pytest.raises(EntryNotFound):
            store.commit(
                Changeset(
                    session_id="s",
                    agent_id="a",
                    expected_version=2,
                    evict=(msgs[0].message_id,),
                    reduction=_reduction("s"),
                )
            )

    def test_summaries_chain_and_supersede(self, store: LedgerStore) -> None:
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

    def test_revision_keeps_original(self, store: LedgerStore) -> None:
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

    def test_pins_persist(self, store: LedgerStore) -> None:
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

    def test_eviction_filters(self, store: LedgerStore) -> None:
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

    # -- sessions ------------------------------------------------------------------------

    def test_sessions_paged_and_deleted(self, store: LedgerStore) -> None:
        for i in range(5):
            _create(store, f"s{i}", [Message.user("x"), Message.user("y")])
            time.sleep(0.005)
        _create(store, "s4", [Message.user("z")], agent_id="b")
        page1 = store.sessions(limit=2)
        page2 = store.sessions(limit=2, offset=2)
        page3 = store.sessions(limit=2, offset=4)
        assert [s.session_id for s in page1 + page2 + page3] == ["s4", "s3", "s2", "s1", "s0"]
        assert page1[0].agents == ("a", "b")
        assert page1[0].active_entries == 3
        assert page1[0].total_entries == 3
        assert store.delete_session("s4") is True
        assert store.delete_session("s4") is False
        assert store.load("s4", "a") is None
        assert store.history("s4", "a") == []
        assert [s.session_id for s in store.sessions()] == ["s3", "s2", "s1", "s0"]

    @pytest.mark.parametrize(("limit", "offset"), [(-1, 0), (2, -1)])
    def test_sessions_rejects_negative_paging(self, store: LedgerStore, limit: int, offset: int) -> None:
        _create(store, "s", [Message.user("x")])
        with pytest.raises(ConfigurationError, match="must be >= 0"):
            store.sessions(limit=limit, offset=offset)

    def test_delete_removes_everything(self, store: LedgerStore) -> None:
        conv = Conversation(store, "gone", "a")
        conv.append(Message.user("a"), Message.user("b"), Message.user("c"))
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=(v.ids[0],))
            ),
            trigger="manual",
        )
        assert store.summaries("gone")
        store.delete_session("gone")
        assert store.summaries("gone") == []
        assert store.reductions("gone") == []
        assert store.evictions("gone") == []
        fresh = Conversation(store, "gone", "a")
        assert fresh.version == 0
        fresh.append(Message.user("again"))
        assert fresh.version == 1

    # -- through a Conversation ------------------------------------------------------------

    def test_restore_equals_live_view(self, store: LedgerStore) -> None:
        conv = Conversation(store, "s", "a")
        for i in range(10):
            conv.append(
                Message.user(f"q{i}"), Message.tool_use(f"t{i}", "f", {"i": i}), Message.tool_result(f"t{i}", "r")
            )
        # A host dict without tracking_id/metadata restores exactly as the live view holds it.
        conv.append({"role": "user", "content": [{"text": "bare strands dict"}]})
        conv.pin(conv.view[1].entry_id)
        conv.before_model_call()
        conv.before_model_call()
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=tuple(v.ids[3:9])), trigger="manual")
        conv.set_agent_state({"mood": "ok"})
        restored = Conversation(store, "s", "a")
        assert list(restored.view.entries) == list(conv.view.entries)
        assert restored.model_call_count == 2
        assert restored.agent_state == {"mood": "ok"}
        assert restored.version == conv.version

    def test_concurrent_writers_lose_nothing(self, store: LedgerStore) -> None:
        Conversation(store, "race", "a").append(Message.user("seed"))
        errors: list[BaseException] = []
        per_thread = 15

        def writer(name: str) -> None:
            conv = Conversation(store, "race", "a", max_retries=200)
            try:
                for i in range(per_thread):
                    conv.append(Message.user(f"{name}-{i}"))
            except BaseException as exc:  # collected and re-raised in the main thread
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors
        snap = store.load("race", "a")
        assert snap is not None
        texts = [e.message.plain_text for e in snap.entries]
        assert len(texts) == 1 + 3 * per_thread
        assert sorted(texts) == sorted(["seed"] + [f"w{n}-{i}" for n in range(3) for i in range(per_thread)])
        assert [e.seq for e in snap.entries] == list(range(len(texts)))
        for n in range(3):
            mine = [t for t in texts if t.startswith(f"w{n}-")]
            assert mine == [f"w{n}-{i}" for i in range(per_thread)]

    def test_edit_with_everything_is_one_commit(self, store: LedgerStore) -> None:
        conv = Conversation(store, "s", "a")
        msgs = [Message.user(f"m{i}") for i in range(4)]
        conv.append(*msgs)
        before = conv.version
        new = Message.assistant("new")
        conv.edit(
            lambda v: Edit(
                appends=(new,),
                pins={v.ids[3]: True},
                plan=ReductionPlan(
                    strategy="custom",
                    evict=(v.ids[2],),
                    summary=SummaryDraft(content="S", summarizer="t", replaces=tuple(v.ids[:2])),
                ),
                trigger="manual",
                agent_state={"x": 1},
            )
        )
        assert conv.version == before + 1
        restored = Conversation(store, "s", "a")
        assert list(restored.view.entries) == list(conv.view.entries)
        assert [e.kind for e in restored.view] == ["summary", "message", "message"]
        assert restored.view[1].pinned
        (red,) = store.reductions("s")
        assert set(red.evicted) == {m.message_id for m in msgs[:3]}
        assert red.messages_before == 5
        assert red.messages_after == 3
