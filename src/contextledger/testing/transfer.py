"""Contract: a conversation's complete records are written in one commit and read back exactly."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ContentRevision, ReductionPlan, SummaryDraft
from contextledger.errors import ConversationExists, InvalidExport, InvalidMessage
from contextledger.history.lifecycle import erase
from contextledger.history.transfer import (
    ConversationRecords,
    conversation_lines,
    read_conversation,
    write_conversation,
)
from contextledger.model.messages import Message
from contextledger.model.records import Revision
from contextledger.stores.capabilities import (
    ERASURE,
    HISTORY,
    SESSIONS,
    TIME_TRAVEL,
    TRANSFER,
    Capability,
    CompleteStore,
)
from contextledger.testing.declared import CapabilityContract

__all__ = ["TransferContract", "rich_conversation"]


def rich_conversation(store: CompleteStore, session_id: str = "s", agent_id: str = "a") -> ConversationRecords:
    """Write a conversation that holds one of everything a conversation can hold; return its records.

    Messages with binary content, pins and unpins, a summary chain (one superseding
    another), a revision, a plain eviction, an undo, model calls, manager and host state,
    and an erased entry's tombstone.
    """
    conv = Conversation(store, session_id, agent_id)
    chat = [
        Message.user("hello"),
        Message.assistant("hi"),
        Message(
            role="user", content=[{"text": "see"}, {"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00"}}}]
        ),
        Message.tool_use("t1", "lookup", {"q": "x", "n": 1.5}),
        Message.tool_result("t1", "a long tool result " * 5),
        Message.assistant("done"),
        Message.user("secret: 1234"),
        Message.assistant("noted"),
    ]
    conv.append(*chat)
    ids = [m.message_id for m in chat]
    conv.pin(ids[2])
    conv.before_model_call()
    conv.unpin(ids[2])
    conv.pin(ids[5], source="model")
    first = conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="summarizing",
            summary=SummaryDraft(content="first summary", summarizer="x", replaces=(ids[0], ids[1])),
            revisions=(
                ContentRevision(
                    message_id=ids[4],
                    content=[{"toolResult": {"toolUseId": "t1", "content": [{"text": "cut"}], "status": "success"}}],
                    tokens=3,
                ),
            ),
        ),
        trigger="manual",
    )
    assert first is not None
    assert first.summary_id is not None
    conv.before_model_call()
    conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="summarizing",
            summary=SummaryDraft(content="second summary", summarizer="x", replaces=(first.summary_id, ids[2])),
        ),
        trigger="proactive",
    )
    evicting = conv.apply_plan(
        lambda _v: ReductionPlan(strategy="sliding_window", evict=(ids[6], ids[7])), trigger="per_turn"
    )
    assert evicting is not None
    conv.undo(evicting.reduction_id)
    conv.append(Message.user("later"))
    conv.set_agent_state({"k": [1, "two", None]})
    conv.before_model_call()
    erase(store, session_id, ids[6], reason="asked to forget", agent_id=agent_id)
    records = read_conversation(store, session_id, agent_id)
    assert records is not None
    return records


class TransferContract(CapabilityContract):
    """``import_conversation``: exact, atomic, idempotent, refusing different content."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (TRANSFER, HISTORY, SESSIONS, ERASURE, TIME_TRAVEL)

    def test_records_written_read_back_exactly(self, store: CompleteStore) -> None:
        """Records written read back exactly."""
        records = rich_conversation(store)
        assert records.tombstones
        assert records.pins
        assert records.revisions
        assert len(records.summaries) == 2
        assert any(h.status == "evicted" for h in records.messages)
        live = [e.entry_id for e in store.load("s", "a").entries]  # type: ignore[union-attr]
        assert store.delete_session("s")
        assert write_conversation(store, records) == "imported"
        again = read_conversation(store, "s", "a")
        assert again is not None
        assert conversation_lines(again) == conversation_lines(records)
        assert again == records
        snapshot = store.load("s", "a")
        assert snapshot is not None
        assert [e.entry_id for e in snapshot.entries] == live
        assert store.agents("s") == ["a"]
        assert [i.session_id for i in store.sessions()] == ["s"]

    def test_an_imported_conversation_goes_on(self, store: CompleteStore) -> None:
        """An imported conversation takes commits and undoes as the original would."""
        records = rich_conversation(store, "orig")
        moved = ConversationRecords.model_validate(
            {
                **records.model_dump(),
                "state": records.state.model_copy(update={"session_id": "moved"}),
                **{
                    name: tuple(r.model_copy(update={"session_id": "moved"}) for r in getattr(records, name))
                    for name in ("messages", "summaries", "reductions", "revisions", "pins", "tombstones")
                },
            }
        )
        assert write_conversation(store, moved) == "imported"
        original = Conversation(store, "orig", "a")
        copy = Conversation(store, "moved", "a")
        assert [e.message for e in copy.view] == [e.message for e in original.view]
        assert copy.version == original.version
        for conv in (original, copy):
            conv.append(Message.assistant("next"))
            second = next(r for r in store.reductions(conv.session_id, "a") if r.trigger == "proactive")
            conv.undo(second.reduction_id, cascade=True)
        assert [e.message.plain_text for e in copy.view] == [e.message.plain_text for e in original.view]

    def test_importing_again_changes_nothing(self, store: CompleteStore) -> None:
        """Importing the same records again changes nothing; different records are refused."""
        records = rich_conversation(store)
        version = records.state.version
        assert write_conversation(store, records) == "unchanged"
        changed = records.model_copy(update={"state": records.state.model_copy(update={"model_call_count": 99})})
        with pytest.raises(ConversationExists):
            write_conversation(store, changed)
        assert store.import_conversation(changed) is False
        after = read_conversation(store, "s", "a")
        assert after is not None
        assert after.state.version == version
        assert after.state.model_call_count == records.state.model_call_count

    def test_bad_records_are_refused_and_write_nothing(self, store: CompleteStore) -> None:
        """Inconsistent or unstorable records raise a typed error and write nothing."""
        records = rich_conversation(store, "orig")
        moved = records.model_copy(update={"state": records.state.model_copy(update={"session_id": "new"})})
        with pytest.raises(InvalidExport, match="belongs to orig"):
            write_conversation(store, moved)
        stray = Revision(session_id="orig", agent_id="a", message_id="nope", number=1, original=[], reason="x")
        with pytest.raises(InvalidExport, match="unknown message"):
            store.import_conversation(records.model_copy(update={"revisions": (*records.revisions, stray)}))
        nan = records.state.model_copy(update={"session_id": "n", "agent_state": {"x": math.nan}})
        with pytest.raises(InvalidMessage):
            store.import_conversation(ConversationRecords(state=nan))
        assert store.agents("new") == []
        assert store.agents("n") == []
