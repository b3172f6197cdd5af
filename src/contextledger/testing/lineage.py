"""Contract: lineage is kept under each ancestor and erasure follows it; idle sessions expire."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.errors import SessionDeleted, SessionExpired
from contextledger.history.expiry import expire
from contextledger.history.fork import fork
from contextledger.history.lifecycle import REDACTED_TEXT, erase
from contextledger.history.transfer import read_conversation
from contextledger.model.messages import Message
from contextledger.model.records import LineageLink, utcnow
from contextledger.stores.capabilities import (
    ERASURE,
    EXPIRY,
    HISTORY,
    LINEAGE,
    SCOPES,
    SESSIONS,
    TIME_TRAVEL,
    Capability,
    CompleteStore,
    ExpiringStore,
    LineageStore,
)
from contextledger.testing.declared import CapabilityContract

__all__ = ["ExpiryContract", "LineageContract"]

SECRET = "the vault code is 0451"


def _texts(store: CompleteStore, session_id: str, agent_id: str = "a") -> str:
    """Every text a conversation holds, through every query that returns content."""
    records = read_conversation(store, session_id, agent_id)
    assert records is not None
    parts = [h.message.model_dump_json() for h in records.messages]
    parts += [s.content for s in records.summaries]
    parts += [str(r.original) for r in records.revisions]
    snapshot = store.load(session_id, agent_id)
    assert snapshot is not None
    parts += [e.message.model_dump_json() for e in snapshot.entries]
    return "\n".join(parts)


def _secret_conversation(store: CompleteStore, session_id: str = "p") -> str:
    """A conversation whose first message holds the secret, covered by a summary; returns its id."""
    conv = Conversation(store, session_id, "a")
    (secret,) = conv.append(Message.user(f"remember: {SECRET}"))
    conv.append(Message.assistant("noted"), Message.user("next question"), Message.assistant("answer"))
    conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s",
            summary=SummaryDraft(content=f"user said {SECRET}", summarizer="x", replaces=(secret.message_id,)),
        ),
        trigger="manual",
        as_given=True,
    )
    return secret.message_id


class LineageContract(CapabilityContract):
    """A fork is recorded under every ancestor; erasing in one reaches every fork that holds the entry."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (LINEAGE, HISTORY, SESSIONS, ERASURE, TIME_TRAVEL, SCOPES)

    def test_links_are_kept_under_the_ancestor_once(self, store: CompleteStore) -> None:
        assert isinstance(store, LineageStore)
        Conversation(store, "p", "a").append(Message.user("hi"))
        link = LineageLink(session_id="p", agent_id="a", child_session_id="c", child_agent_id="a", at_call=1)
        assert store.add_lineage([link]) == 1
        assert store.add_lineage([link]) == 0  # recorded again: nothing changes
        missing = link.model_copy(update={"session_id": "nobody"})
        assert store.add_lineage([missing]) == 0  # no ancestor, nothing kept
        (kept,) = store.lineage("p")
        assert (kept.child_session_id, kept.at_call, kept.kind, kept.ledger) == ("c", 1, "fork", None)
        assert store.lineage("p", "a") == [kept]
        assert store.lineage("p", "b") == []
        assert store.lineage("nobody") == []
        copy = link.model_copy(update={"kind": "copy", "ledger": "sqlite:///elsewhere.db", "child_session_id": "p"})
        assert store.add_lineage([copy]) == 1
        assert {(x.kind, x.ledger) for x in store.lineage("p")} == {("fork", None), ("copy", "sqlite:///elsewhere.db")}
        store.delete_session("p")
        assert store.lineage("p") == []

    def test_a_fork_of_a_fork_is_kept_under_each_ancestor(self, store: CompleteStore) -> None:
        _secret_conversation(store)
        fork(store, "p", "c")
        fork(store, "c", "g")
        assert [(x.child_session_id, x.depth) for x in store.lineage("p")] == [("c", 1), ("g", 2)]
        assert [(x.child_session_id, x.depth) for x in store.lineage("c")] == [("g", 1)]

    def test_erase_reaches_forks_of_forks_history_view_and_summaries(self, store: CompleteStore) -> None:
        secret = _secret_conversation(store)
        fork(store, "p", "c")
        fork(store, "c", "g")
        fork(store, "p", "early", at_call=None)
        for session in ("p", "c", "g", "early"):
            assert SECRET in _texts(store, session)
        report = erase(store, "p", secret, reason="asked")
        assert {t.session_id for t in report.tombstones} == {"p", "c", "g", "early"}
        for session in ("p", "c", "g", "early"):
            assert SECRET not in _texts(store, session), session
            (tombstone,) = store.tombstones(session)
            assert (tombstone.entry_id, tombstone.reason) == (secret, "asked")
            assert [s.content for s in store.summaries(session)] == [REDACTED_TEXT]

    def test_erase_in_a_fork_leaves_its_parent(self, store: CompleteStore) -> None:
        secret = _secret_conversation(store)
        fork(store, "p", "c")
        erase(store, "c", secret, reason="only the branch")
        assert SECRET in _texts(store, "p")
        assert SECRET not in _texts(store, "c")

    def test_lineage_survives_a_deleted_fork_between(self, store: CompleteStore) -> None:
        secret = _secret_conversation(store)
        fork(store, "p", "c")
        fork(store, "c", "g")
        store.delete_session("c")
        report = erase(store, "p", secret, reason="asked")
        assert {t.session_id for t in report.descendants} == {"g"}
        assert SECRET not in _texts(store, "g")

    def test_a_fork_made_while_its_parent_is_erased_gets_the_erasure(self, store: CompleteStore) -> None:
        """The fork's copy may be read before the erase commits; the fork applies the erasure after its commit."""
        secret = _secret_conversation(store)
        read = threading.Event()
        erased = threading.Event()
        original = store.load

        def load(session_id: str, agent_id: str):  # type: ignore[no-untyped-def]
            snapshot = original(session_id, agent_id)
            if session_id == "p" and threading.current_thread().name == "forker" and not read.is_set():
                read.set()
                erased.wait(10)  # the erase commits (and lists lineage) between the read and the fork's commit
            return snapshot

        errors: list[BaseException] = []

        def forker() -> None:
            try:
                fork(store, "p", "c")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        store.load = load  # type: ignore[method-assign]
        try:
            thread = threading.Thread(target=forker, name="forker")
            thread.start()
            assert read.wait(10)
            erase(store, "p", secret, reason="raced")
            erased.set()
            thread.join(20)
        finally:
            store.load = original  # type: ignore[method-assign]
        assert not errors
        assert SECRET not in _texts(store, "c")
        assert [t.reason for t in store.tombstones("c")] == ["raced"]


class ExpiryContract(CapabilityContract):
    """Whole idle sessions expire atomically, leave expiries, and a writer still holding one is told."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (EXPIRY, HISTORY, SESSIONS, ERASURE, LINEAGE, TIME_TRAVEL, SCOPES)

    def test_an_idle_session_expires_and_its_writer_is_told(self, store: CompleteStore) -> None:
        assert isinstance(store, ExpiringStore)
        conv = Conversation(store, "old", "a")
        conv.append(Message.user("hello"))
        Conversation(store, "old", "b").append(Message.user("hi"))
        Conversation(store, "fresh", "a").append(Message.user("still here"))
        cutoff = utcnow() + timedelta(seconds=1)
        Conversation(store, "fresh", "a").append(Message.user("written after the cut-off"))
        store_before = store.load("fresh", "a")
        assert store_before is not None
        expired = store.expire_session("old", idle_before=cutoff, reason="idle")
        assert sorted(e.agent_id for e in expired) == ["a", "b"]
        assert store.load("old", "a") is None
        assert store.agents("old") == []
        assert "old" not in [i.session_id for i in store.sessions()]
        assert sorted(e.agent_id for e in store.expirations("old")) == ["a", "b"]
        with pytest.raises(SessionExpired):
            conv.append(Message.user("too late"))
        fresh = Conversation(store, "old", "a")  # starts afresh
        assert fresh.version == 0
        fresh.append(Message.user("a new start"))
        assert [e.message.plain_text for e in fresh.view] == ["a new start"]

    def test_a_session_written_after_the_cutoff_is_kept(self, store: CompleteStore) -> None:
        assert isinstance(store, ExpiringStore)
        cutoff = utcnow() - timedelta(seconds=1)
        Conversation(store, "s", "a").append(Message.user("hello"))
        assert store.expire_session("s", idle_before=cutoff, reason="idle") == []
        assert store.load("s", "a") is not None
        assert store.expire_session("nobody", idle_before=utcnow(), reason="idle") == []

    def test_deleted_is_not_expired(self, store: CompleteStore) -> None:
        assert isinstance(store, ExpiringStore)
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("hello"))
        store.expire_session("s", idle_before=utcnow() + timedelta(seconds=1), reason="idle")
        Conversation(store, "s", "a").append(Message.user("again"))
        conv2 = Conversation(store, "s", "a")
        store.delete_session("s")
        assert store.expirations("s") == []
        with pytest.raises(SessionDeleted) as raised:
            conv2.append(Message.user("after the delete"))
        assert not isinstance(raised.value, SessionExpired) or bool(getattr(store, "ttl_ms", 0))

    def test_expire_keeps_lineage_to_the_forks_beyond(self, store: CompleteStore) -> None:
        secret = _secret_conversation(store)
        fork(store, "p", "c")
        fork(store, "c", "g")
        assert [e.session_id for e in expire(store, idle=utcnow() + timedelta(seconds=1), session_id="c")] == ["c"]
        report = erase(store, "p", secret, reason="asked")
        assert {t.session_id for t in report.descendants} == {"g"}
        assert SECRET not in _texts(store, "g")
