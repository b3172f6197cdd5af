"""Contract: erase and prune are atomic, typed, and leave tombstones on every store."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ContentRevision, ReductionPlan, SummaryDraft
from contextledger.errors import EntryNotFound
from contextledger.history.lifecycle import ERASED_TEXT, PRUNE_REASON, REDACTED_TEXT, erase
from contextledger.managers import SummarizingConversationManager
from contextledger.model.messages import Message
from contextledger.model.records import Tombstone
from contextledger.stores.capabilities import (
    ERASURE,
    HISTORY,
    LINEAGE,
    SESSIONS,
    TIME_TRAVEL,
    Capability,
    CompleteStore,
)
from contextledger.testing.declared import CapabilityContract

__all__ = ["RetentionContract"]


class RetentionContract(CapabilityContract):
    """Erase overwrites one entry, its revisions and summaries at once; prune deletes evicted rows only."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (ERASURE, HISTORY, TIME_TRAVEL, LINEAGE, SESSIONS)

    def test_erase_is_all_or_nothing(self, store: CompleteStore) -> None:
        """An erase naming a summary the conversation lacks changes nothing."""
        conv = Conversation(store, "s", "a")
        (msg,) = conv.append(Message.user("secret words"))
        conv.append(Message.assistant("ok"))
        tombstone = Tombstone(session_id="s", agent_id="a", entry_id=msg.message_id, reason="x")
        erased = Message(message_id=msg.message_id, role="user", content=[{"text": ERASED_TEXT}])
        with pytest.raises(EntryNotFound):
            store.erase(tombstone, erased, {"no-such-summary": REDACTED_TEXT})
        assert store.entries("s", "a", [msg.message_id])[0].message.plain_text == "secret words"
        assert store.tombstones("s") == []
        with pytest.raises(EntryNotFound):
            store.erase(tombstone.model_copy(update={"entry_id": "nope"}), erased, {})

    def test_erase_overwrites_entry_revisions_and_summaries(self, store: CompleteStore) -> None:
        """The entry, its revisions and the summaries named change in one operation, with a tombstone."""
        conv = Conversation(store, "s", "a")
        (msg,) = conv.append(Message.user("secret words"))
        conv.append(Message.assistant("ok"), Message.user("next"))
        conv.apply_plan(
            lambda _v: ReductionPlan(
                strategy="t", revisions=(ContentRevision(message_id=msg.message_id, content=[{"text": "secret"}]),)
            ),
            trigger="manual",
            as_given=True,
        )
        red = conv.apply_plan(
            lambda _v: ReductionPlan(
                strategy="s",
                summary=SummaryDraft(content="about secret words", summarizer="x", replaces=(msg.message_id,)),
            ),
            trigger="manual",
            as_given=True,
        )
        assert red is not None
        assert red.summary_id is not None
        tombstone = Tombstone(
            session_id="s", agent_id="a", entry_id=msg.message_id, reason="asked", summaries=(red.summary_id,)
        )
        erased = Message(message_id=msg.message_id, role="user", content=[{"text": ERASED_TEXT}])
        store.erase(tombstone, erased, {red.summary_id: REDACTED_TEXT})
        (row,) = store.entries("s", "a", [msg.message_id])
        assert row.message.plain_text == ERASED_TEXT
        assert row.status == "evicted"
        assert store.revisions("s", "a", msg.message_id) == []
        assert [s.content for s in store.summaries("s", "a")] == [REDACTED_TEXT]
        (kept,) = store.tombstones("s")
        assert (kept.entry_id, kept.reason, kept.summaries) == (msg.message_id, "asked", (red.summary_id,))
        assert store.tombstones("s", "other") == []
        assert Conversation(store, "s", "a").view[0].message.plain_text == REDACTED_TEXT

    def test_prune_never_deletes_an_active_entry(self, store: CompleteStore) -> None:
        """Only evicted entries named are deleted (with their revisions); active ones are skipped."""
        conv = Conversation(store, "s", "a")
        msgs = conv.append(Message.user("u0"), Message.assistant("a1"), Message.user("u2"))
        conv.apply_plan(
            lambda _v: ReductionPlan(
                strategy="t",
                revisions=(ContentRevision(message_id=msgs[0].message_id, content=[{"text": "u"}]),),
            ),
            trigger="manual",
            as_given=True,
        )
        conv.apply_plan(
            lambda _v: ReductionPlan(strategy="t", evict=(msgs[0].message_id,)), trigger="manual", as_given=True
        )
        tombstones = [
            Tombstone(session_id="s", agent_id="a", entry_id=m.message_id, reason=PRUNE_REASON) for m in msgs[:2]
        ]
        assert store.prune("s", "a", [m.message_id for m in msgs[:2]], tombstones) == 1
        assert [h.message.message_id for h in store.history("s", "a")] == [m.message_id for m in msgs[1:]]
        assert store.revisions("s", "a") == []
        assert [t.entry_id for t in store.tombstones("s", "a")] == [msgs[0].message_id]
        assert [e.entry_id for e in Conversation(store, "s", "a").view] == [m.message_id for m in msgs[1:]]
        assert store.prune("nope", "a", [msgs[1].message_id], []) == 0

    def test_an_entry_erased_then_pruned_keeps_both_tombstones(self, store: CompleteStore) -> None:
        """Erasing an evicted entry and pruning it later leaves two tombstones, oldest first."""
        conv = Conversation(store, "s", "a")
        msgs = conv.append(Message.user("secret words"), Message.assistant("ok"), Message.user("next"))
        conv.apply_plan(
            lambda _v: ReductionPlan(strategy="t", evict=(msgs[0].message_id,)), trigger="manual", as_given=True
        )
        erased = Message(message_id=msgs[0].message_id, role="user", content=[{"text": ERASED_TEXT}])
        store.erase(Tombstone(session_id="s", agent_id="a", entry_id=msgs[0].message_id, reason="asked"), erased, {})
        pruned = Tombstone(session_id="s", agent_id="a", entry_id=msgs[0].message_id, reason=PRUNE_REASON)
        assert store.prune("s", "a", [msgs[0].message_id], [pruned]) == 1
        assert [(t.entry_id, t.reason) for t in store.tombstones("s", "a")] == [
            (msgs[0].message_id, "asked"),
            (msgs[0].message_id, PRUNE_REASON),
        ]

    def test_a_conversation_opened_before_an_erase_never_summarizes_the_erased_text(self, store: CompleteStore) -> None:
        """An erase gives the conversation a new version: a copy open elsewhere re-reads at its next commit."""
        manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
        stale = Conversation(store, "s", "a", manager=manager)
        (secret,) = stale.append(Message.user("refund to IBAN DE44 5001"))
        stale.append(Message.assistant("queued"), Message.user("thanks"), Message.assistant("bye"))
        before = stale.version
        erase(store, "s", secret.message_id, reason="asked", agent_id="a")
        state = store.conversation_state("s", "a")
        assert state is not None
        assert state.version == before + 1
        stale.append(Message.user("one more"), Message.assistant("sure"))  # conflicts once, re-reads
        assert stale.reduce() is not None
        assert all("DE44" not in s.content for s in store.summaries("s", "a"))
        assert all("DE44" not in e.message.plain_text for e in stale.view if e.kind == "message")
