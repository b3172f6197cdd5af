"""Contract: pin history, a deleted session, a closed store, a changeset sent twice."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation, Edit
from contextledger.core.changeset import Changeset, ReductionPlan
from contextledger.errors import EntryNotFound, LedgerClosed, SessionDeleted
from contextledger.model.messages import Message
from contextledger.model.records import ViewEntry, utcnow
from contextledger.stores.capabilities import HISTORY, SESSIONS, Capability, CompleteStore
from contextledger.testing.declared import CapabilityContract

__all__ = ["LifecycleContract", "PinHistoryContract"]


def _entries(messages: list[Message], start: int = 0) -> tuple[ViewEntry, ...]:
    return tuple(ViewEntry(entry_id=m.message_id, seq=start + i, message=m) for i, m in enumerate(messages))


class PinHistoryContract(CapabilityContract):
    """Every pin and unpin is a row committed with the change: which entry, who asked, when."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (HISTORY, SESSIONS)

    def test_pin_history_records_each_change_with_its_source(self, store: CompleteStore) -> None:
        msgs = [Message.user(f"m{i}") for i in range(3)]
        conv = Conversation(store, "s", "a")
        conv.append(*msgs)
        before = utcnow()
        conv.pin(msgs[0].message_id)
        conv.pin_index(2, source="model")
        conv.unpin(msgs[0].message_id, source="host")
        events = store.pin_history("s")
        assert [(e.entry_id, e.pinned, e.source) for e in events] == [
            (msgs[0].message_id, True, "api"),
            (msgs[2].message_id, True, "model"),
            (msgs[0].message_id, False, "host"),
        ]
        assert all((e.session_id, e.agent_id) == ("s", "a") for e in events)
        assert len({e.changeset_id for e in events}) == 3
        assert [e.at for e in events] == sorted(e.at for e in events)
        assert before - timedelta(seconds=5) <= events[0].at <= utcnow() + timedelta(seconds=5)
        assert store.pin_history("s", "a") == events
        assert store.pin_history("s", "b") == []
        assert store.pin_history("nope") == []

    def test_pin_events_carry_their_changeset_and_agent(self, store: CompleteStore) -> None:
        a_msgs, b_msgs = [Message.user("a0"), Message.user("a1")], [Message.user("b0")]
        store.commit(Changeset(session_id="s", agent_id="a", expected_version=0, appends=_entries(a_msgs), next_seq=2))
        store.commit(Changeset(session_id="s", agent_id="b", expected_version=0, appends=_entries(b_msgs), next_seq=1))
        both = Changeset(
            session_id="s",
            agent_id="a",
            expected_version=1,
            pins={a_msgs[0].message_id: True, a_msgs[1].message_id: True},
            pin_source="host",
        )
        store.commit(both)
        other = Changeset(
            session_id="s", agent_id="b", expected_version=1, pins={b_msgs[0].message_id: True}, pin_source="model"
        )
        store.commit(other)
        events = store.pin_history("s")
        assert sorted((e.agent_id, e.entry_id, e.changeset_id, e.source) for e in events) == sorted(
            [
                ("a", a_msgs[0].message_id, both.changeset_id, "host"),
                ("a", a_msgs[1].message_id, both.changeset_id, "host"),
                ("b", b_msgs[0].message_id, other.changeset_id, "model"),
            ]
        )
        assert [e.entry_id for e in store.pin_history("s", "a")] == [m.message_id for m in a_msgs]
        assert [e.entry_id for e in store.pin_history("s", "b")] == [b_msgs[0].message_id]

    def test_a_refused_pin_records_nothing(self, store: CompleteStore) -> None:
        msgs = [Message.user("m0")]
        store.commit(Changeset(session_id="s", agent_id="a", expected_version=0, appends=_entries(msgs), next_seq=1))
        bad = Changeset(session_id="s", agent_id="a", expected_version=1, pins={msgs[0].message_id: True, "nope": True})
        with pytest.raises(EntryNotFound):
            store.commit(bad)
        assert store.pin_history("s") == []

    def test_pins_in_a_reduction_commit_with_it_and_go_with_the_session(self, store: CompleteStore) -> None:
        conv = Conversation(store, "s", "a")
        msgs = [Message.user(f"m{i}") for i in range(3)]
        conv.append(*msgs)
        conv.edit(
            lambda v: Edit(
                pins={v.ids[2]: True},
                pin_source="host",
                plan=ReductionPlan(strategy="w", evict=(v.ids[0],)),
                trigger="manual",
            )
        )
        (event,) = store.pin_history("s")
        assert (event.entry_id, event.source) == (msgs[2].message_id, "host")
        assert len(store.reductions("s")) == 1
        assert store.delete_session("s")
        assert store.pin_history("s") == []


class LifecycleContract(CapabilityContract):
    """Exactly-once replays, deleted sessions that stay deleted, closed stores that stay closed."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (HISTORY, SESSIONS)

    def test_a_changeset_sent_again_returns_its_version_and_writes_nothing(self, store: CompleteStore) -> None:
        msgs = [Message.user("m0"), Message.user("m1")]
        create = Changeset(session_id="s", agent_id="a", expected_version=0, appends=_entries(msgs), next_seq=2)
        assert store.commit(create) == 1
        assert store.commit(create) == 1  # not ConcurrencyConflict, not DuplicateEntry
        pin = Changeset(
            session_id="s", agent_id="a", expected_version=1, pins={msgs[0].message_id: True}, model_call_count=1
        )
        assert store.commit(pin) == 2
        more = Changeset(
            session_id="s", agent_id="a", expected_version=2, appends=_entries([Message.user("m2")], 2), next_seq=3
        )
        assert store.commit(more) == 3
        assert store.commit(pin) == 2
        assert store.commit(more) == 3
        assert store.commit(create) == 1
        snap = store.load("s", "a")
        assert snap is not None
        assert (snap.state.version, snap.state.model_call_count, len(snap.entries)) == (3, 1, 3)
        assert len(store.history("s", "a")) == 3
        assert len(store.pin_history("s")) == 1

    def test_a_deleted_session_is_not_recreated_by_a_writer_holding_it(self, store: CompleteStore) -> None:
        task = Message.user("the task")
        writer = Conversation(store, "s", "a")
        writer.append(task, Message.assistant("ok"))
        writer.pin(task.message_id)
        assert store.delete_session("s")
        with pytest.raises(SessionDeleted):
            writer.append(Message.user("still here?"))
        with pytest.raises(SessionDeleted):
            writer.before_model_call()
        assert store.load("s", "a") is None
        assert store.agents("s") == []
        assert all(info.session_id != "s" for info in store.sessions())
        # A writer that opens the session afresh starts a new conversation on purpose.
        fresh = Conversation(store, "s", "a")
        fresh.append(Message.user("new start"))
        assert fresh.version == 1

    def test_a_closed_store_refuses_every_call(self, store: CompleteStore) -> None:
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("m0"))
        store.close()
        calls: list[Callable[[], Any]] = [
            lambda: store.load("s", "a"),
            lambda: store.commit(Changeset(session_id="s", agent_id="a", expected_version=1, model_call_count=3)),
            lambda: store.history("s", "a"),
            lambda: store.evictions("s"),
            lambda: store.reductions("s"),
            lambda: store.summaries("s"),
            lambda: store.revisions("s", "a"),
            lambda: store.pin_history("s"),
            lambda: store.agents("s"),
            lambda: store.sessions(),
            lambda: store.delete_session("s"),
            lambda: conv.append(Message.user("m1")),
            lambda: Conversation(store, "s", "a"),
        ]
        for call in calls:
            with pytest.raises(LedgerClosed):
                call()
        store.close()  # closing twice is harmless
