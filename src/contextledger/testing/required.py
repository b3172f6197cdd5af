"""The required contract: what every store must do with ``load``, ``commit`` and ``close`` alone.

Subclass :class:`RequiredContract` in a test module where a ``store`` fixture yields a
fresh, empty :class:`~contextledger.stores.base.LedgerStore`. It reads nothing but
``load``, so a new backend passes it before it has a single capability; the capability
contracts (:mod:`contextledger.testing`) then run for what the store declares.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from contextledger.conversation.conversation import Conversation, Edit
from contextledger.core.changeset import Changeset, ContentRevision, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import (
    ConcurrencyConflict,
    DuplicateEntry,
    EntryNotFound,
    InvalidMessage,
    LedgerClosed,
    SessionDeleted,
)
from contextledger.model.messages import Message
from contextledger.model.records import Reduction, ViewEntry
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import ALL, capabilities_of

__all__ = ["RequiredContract", "create", "edit_everything", "entries_of", "ids", "reduction"]


def entries_of(messages: list[Message], start: int = 0) -> tuple[ViewEntry, ...]:
    """``messages`` as the entries a changeset appends, from seq ``start`` (tokens 10, 11, ...)."""
    return tuple(
        ViewEntry(entry_id=m.message_id, seq=start + i, message=m, tokens=10 + i) for i, m in enumerate(messages)
    )


def reduction(session_id: str, agent_id: str = "a", **fields: object) -> Reduction:
    """A manual reduction row of the conversation, with ``fields`` set."""
    row: dict[str, object] = {
        "session_id": session_id,
        "agent_id": agent_id,
        "trigger": "manual",
        "strategy": "test",
        "messages_before": 0,
        "messages_after": 0,
        "tokens_before": 0,
        "tokens_after": 0,
    }
    row.update(fields)
    return Reduction.model_validate(row)


def create(store: LedgerStore, session_id: str, messages: list[Message], agent_id: str = "a") -> int:
    """Create the conversation holding ``messages``; its version (1)."""
    return store.commit(
        Changeset(
            session_id=session_id,
            agent_id=agent_id,
            expected_version=0,
            appends=entries_of(messages),
            next_seq=len(messages),
        )
    )


def ids(store: LedgerStore, session_id: str, agent_id: str = "a") -> list[str]:
    """The entry ids of the conversation's active view, in order."""
    snapshot = store.load(session_id, agent_id)
    assert snapshot is not None
    return [e.entry_id for e in snapshot.entries]


def edit_everything(store: LedgerStore) -> tuple[Conversation, list[Message]]:
    """Four messages, then one edit that appends, pins, evicts, summarizes and sets state; checks it is one commit."""
    conv = Conversation(store, "s", "a")
    msgs = [Message.user(f"m{i}") for i in range(4)]
    conv.append(*msgs)
    before = conv.version
    conv.edit(
        lambda v: Edit(
            appends=(Message.assistant("new"),),
            pins={v.ids[3]: True},
            plan=ReductionPlan(
                strategy="custom",
                evict=(v.ids[2],),
                summary=SummaryDraft(content="S", summarizer="t", replaces=tuple(v.ids[:2])),
            ),
            agent_state={"x": 1},
        )
    )
    assert conv.version == before + 1
    return conv, msgs


def _evict(session_id: str, version: int, *entry_ids: str) -> Changeset:
    return Changeset(
        session_id=session_id,
        agent_id="a",
        expected_version=version,
        evict=entry_ids,
        reduction=reduction(session_id, evicted=entry_ids),
    )


class RequiredContract:
    """Load, commit (all-or-nothing, versioned, exactly once) and close, observed through ``load`` only."""

    # -- declarations --------------------------------------------------------------------

    def test_each_declared_capability_is_implemented(self, store: LedgerStore) -> None:
        assert isinstance(store, LedgerStore)
        declared = capabilities_of(store)
        assert declared <= {c.name for c in ALL}, f"unknown capabilities {declared - {c.name for c in ALL}}"
        for capability in ALL:
            if capability.name in declared:
                assert isinstance(store, capability.protocol), f"declares {capability.name} without its methods"

    # -- state and appends ---------------------------------------------------------------

    def test_load_unknown_is_none(self, store: LedgerStore) -> None:
        assert store.load("nope", "a") is None

    def test_create_and_load_in_order(self, store: LedgerStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(5)]
        assert create(store, "s", msgs) == 1
        snap = store.load("s", "a")
        assert snap is not None
        assert (snap.state.version, snap.state.next_seq) == (1, 5)
        assert [e.message for e in snap.entries] == msgs
        assert [e.tokens for e in snap.entries] == [10, 11, 12, 13, 14]
        assert [e.seq for e in snap.entries] == [0, 1, 2, 3, 4]

    def test_content_round_trips_losslessly(self, store: LedgerStore) -> None:
        msg = Message(
            role="user",
            content=[
                {"text": "héllo ✓ \x00"},
                {"image": {"format": "png", "source": {"bytes": bytes(range(256))}}},
                {"reasoningContent": {"reasoningText": {"text": "why", "signature": "sig"}}},
                {"someFutureBlock": {"nested": [1, 2.5, None, True, {"k": "v"}]}},
            ],
            metadata={"usage": {"inputTokens": 3}, "custom": {"x": [1]}},
        )
        create(store, "s", [msg])
        snap = store.load("s", "a")
        assert snap is not None
        assert snap.entries[0].message == msg

    def test_a_stale_version_conflicts_and_changes_nothing(self, store: LedgerStore) -> None:
        create(store, "s", [Message.user("a")])
        stale = Changeset(
            session_id="s", agent_id="a", expected_version=0, appends=entries_of([Message.user("b")], 1), next_seq=2
        )
        for expected in (0, 5):
            with pytest.raises(ConcurrencyConflict):
                store.commit(stale.model_copy(update={"expected_version": expected}))
        snap = store.load("s", "a")
        assert snap is not None
        assert (snap.state.version, len(snap.entries)) == (1, 1)

    def test_a_version_of_a_conversation_that_does_not_exist_is_refused(self, store: LedgerStore) -> None:
        with pytest.raises(SessionDeleted):
            store.commit(Changeset(session_id="s", agent_id="a", expected_version=3, model_call_count=1))
        assert store.load("s", "a") is None

    def test_a_duplicate_append_is_rejected_whole(self, store: LedgerStore) -> None:
        first = Message.user("a")
        create(store, "s", [first])
        bad = Changeset(
            session_id="s", agent_id="a", expected_version=1, appends=entries_of([Message.user("b"), first], 1)
        )
        with pytest.raises(DuplicateEntry):
            store.commit(bad)
        assert ids(store, "s") == [first.message_id]

    def test_state_fields_persist_and_none_keeps(self, store: LedgerStore) -> None:
        create(store, "s", [Message.user("a")])
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
        state = snap.state
        assert (state.version, state.model_call_count) == (3, 7)
        assert (state.manager_state, state.agent_state) == ({"manager": "x", "n": 1}, {"k": ["v", 2]})

    @pytest.mark.parametrize("bad", ["set", "nan", "agent_state"])
    def test_a_value_json_cannot_hold_is_rejected_whole(self, store: LedgerStore, bad: str) -> None:
        create(store, "s", [Message.user("a")])
        before = store.load("s", "a")
        fields: dict[str, object] = {"session_id": "s", "agent_id": "a", "expected_version": 1, "next_seq": 2}
        if bad == "agent_state":
            fields["agent_state"] = {"k": object()}
        else:
            odd = Message(role="user", content=[{"json": {1, 2} if bad == "set" else float("nan")}])
            fields["appends"] = entries_of([odd], 1)
        with pytest.raises(InvalidMessage, match="JSON"):
            store.commit(Changeset.model_validate(fields))
        assert store.load("s", "a") == before

    def test_agents_are_isolated(self, store: LedgerStore) -> None:
        create(store, "s", [Message.user("a1")], agent_id="a")
        create(store, "s", [Message.user("b1"), Message.user("b2")], agent_id="b")
        assert len(ids(store, "s", "a")) == 1
        assert len(ids(store, "s", "b")) == 2

    def test_a_changeset_sent_again_is_applied_once(self, store: LedgerStore) -> None:
        msgs = [Message.user("m0"), Message.user("m1")]
        first = Changeset(session_id="s", agent_id="a", expected_version=0, appends=entries_of(msgs), next_seq=2)
        pin = Changeset(session_id="s", agent_id="a", expected_version=1, pins={msgs[0].message_id: True})
        assert [store.commit(first), store.commit(first), store.commit(pin), store.commit(pin)] == [1, 1, 2, 2]
        snap = store.load("s", "a")
        assert snap is not None
        assert (snap.state.version, [e.pinned for e in snap.entries]) == (2, [True, False])

    # -- reductions ----------------------------------------------------------------------

    def test_an_eviction_leaves_the_view(self, store: LedgerStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(4)]
        create(store, "s", msgs)
        assert store.commit(_evict("s", 1, msgs[0].message_id)) == 2
        assert ids(store, "s") == [m.message_id for m in msgs[1:]]

    @pytest.mark.parametrize("second", ["no-such-entry", "evicted"])
    def test_an_eviction_of_what_is_not_active_is_rejected_whole(self, store: LedgerStore, second: str) -> None:
        msgs = [Message.user(f"m{i}") for i in range(3)]
        create(store, "s", msgs)
        version = 1
        if second == "evicted":
            version = store.commit(_evict("s", 1, msgs[2].message_id))
        target = "no-such-entry" if second == "no-such-entry" else msgs[2].message_id
        bad = _evict("s", version, msgs[0].message_id, target).model_copy(
            update={"appends": entries_of([Message.user("new")], 3), "next_seq": 4, "model_call_count": 9}
        )
        before = store.load("s", "a")
        with pytest.raises(EntryNotFound):
            store.commit(bad)
        assert store.load("s", "a") == before

    def test_summaries_revisions_and_pins_shape_the_restored_view(self, store: LedgerStore) -> None:
        result = Message.tool_result("t1", "x" * 500)
        msgs = [Message.user(f"m{i}") for i in range(4)] + [Message.tool_use("t1", "read", {"p": 1}), result]
        conv = Conversation(store, "s", "a")
        conv.append(*msgs)

        def summarize(text: str, count: int) -> Callable[[View], ReductionPlan]:
            return lambda v: ReductionPlan(
                strategy="summarizing",
                summary=SummaryDraft(content=text, summarizer="t", replaces=tuple(v.ids[:count])),
            )

        conv.apply_plan(summarize("S1", 3), trigger="proactive")
        conv.apply_plan(summarize("S2", 2), trigger="proactive")  # supersedes S1
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="sliding_window",
                revisions=(ContentRevision(message_id=result.message_id, content=[{"text": "short"}]),),
            ),
            trigger="reactive",
        )
        conv.pin(msgs[4].message_id)
        snap = store.load("s", "a")
        assert snap is not None
        # The newest user prompt (m3) stays in the view whatever the plan asked (the view rules).
        assert [e.kind for e in snap.entries] == ["summary", "message", "message", "message"]
        assert [e.message.plain_text for e in snap.entries[:2]] == ["S2", "m3"]
        assert snap.entries[3].message.content == [{"text": "short"}]
        assert [e.pinned for e in snap.entries] == [False, False, True, False]
        assert list(snap.entries) == list(conv.view.entries)
        with pytest.raises(EntryNotFound):
            store.commit(Changeset(session_id="s", agent_id="a", expected_version=conv.version, pins={"zzz": True}))

    # -- through a Conversation ------------------------------------------------------------

    def test_restore_equals_live_view(self, store: LedgerStore) -> None:
        conv = Conversation(store, "s", "a")
        for i in range(10):
            conv.append(
                Message.user(f"q{i}"), Message.tool_use(f"t{i}", "f", {"i": i}), Message.tool_result(f"t{i}", "r")
            )
        conv.append({"role": "user", "content": [{"text": "bare host dict"}]})
        conv.pin(conv.view[1].entry_id)
        conv.before_model_call()
        conv.before_model_call()
        conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=tuple(v.ids[3:9])), trigger="manual")
        conv.set_agent_state({"mood": "ok"})
        restored = Conversation(store, "s", "a")
        assert list(restored.view.entries) == list(conv.view.entries)
        assert (restored.model_call_count, restored.agent_state) == (2, {"mood": "ok"})
        assert restored.version == conv.version

    def test_an_edit_with_everything_is_one_commit(self, store: LedgerStore) -> None:
        conv, _ = edit_everything(store)
        restored = Conversation(store, "s", "a")
        assert list(restored.view.entries) == list(conv.view.entries)
        assert [e.kind for e in restored.view] == ["summary", "message", "message"]
        assert restored.view[1].pinned

    def test_concurrent_writers_lose_nothing(self, store: LedgerStore) -> None:
        Conversation(store, "race", "a").append(Message.user("seed"))
        errors: list[BaseException] = []
        per_thread = 10

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
        assert sorted(texts) == sorted(["seed"] + [f"w{n}-{i}" for n in range(3) for i in range(per_thread)])
        assert [e.seq for e in snap.entries] == list(range(len(texts)))
        for n in range(3):
            assert [t for t in texts if t.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(per_thread)]

    # -- closing -------------------------------------------------------------------------

    def test_a_closed_store_refuses_load_and_commit(self, store: LedgerStore) -> None:
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("m0"))
        store.close()
        with pytest.raises(LedgerClosed):
            store.load("s", "a")
        with pytest.raises(LedgerClosed):
            store.commit(Changeset(session_id="s", agent_id="a", expected_version=1, model_call_count=3))
        with pytest.raises(LedgerClosed):
            conv.append(Message.user("m1"))
        store.close()  # closing twice is harmless
