"""Contract: a store under :class:`~contextledger.stores.encrypted.EncryptedStore` keeps only sealed content.

Runs on the ``store`` fixture: every store must keep what the encrypted layer gives it
exactly (tokens included), swap tokens in place (``reseal``) and erase them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ContentRevision, ReductionPlan, SummaryDraft
from contextledger.encryption import Keyring, Sealer, key_id_of, new_key, sealed_token
from contextledger.errors import EncryptionError, EncryptionKeyMissing
from contextledger.history.lifecycle import erase
from contextledger.history.rotation import CLEAR, key_census, rotate
from contextledger.history.transfer import conversation_lines, read_conversation
from contextledger.model.messages import Message
from contextledger.model.stored import sealed_values_allowed
from contextledger.stores.capabilities import (
    ERASURE,
    HISTORY,
    LINEAGE,
    RESEAL,
    SESSIONS,
    TIME_TRAVEL,
    Capability,
    CompleteStore,
)
from contextledger.stores.encrypted import EncryptedStore
from contextledger.testing.declared import CapabilityContract

__all__ = ["SECRET", "EncryptionContract", "encrypted_conversation", "stored_tokens"]

SECRET = "the launch code is 7-ALPHA-9"
K1, K2, OTHER = new_key(), new_key(), new_key()


def encrypted(store: CompleteStore, *keys: tuple[str, str]) -> EncryptedStore:
    """``store`` under the keys (the first current)."""
    return EncryptedStore(store, Sealer(Keyring(list(keys) or [("k1", K1)])))


def encrypted_conversation(store: EncryptedStore) -> dict[str, Any]:
    """A conversation with the secret wherever content lives; the ids of its first message and summary.

    The secret is in messages, a tool input, metadata, a revision, a summary and host state.
    """
    conv = Conversation(store, "s", "a")
    (first,) = conv.append(Message.user(f"remember {SECRET}", metadata={"custom": {"note": SECRET}}))
    conv.append(
        Message.tool_use("t1", "lookup", {"q": SECRET}),
        Message.tool_result("t1", f"found {SECRET}"),
        Message.assistant("done", metadata={"custom": {"pinned": True}}),
    )
    conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="t",
            revisions=(ContentRevision(message_id=first.message_id, content=[{"text": f"short {SECRET}"}]),),
        ),
        trigger="manual",
        as_given=True,
    )
    red = conv.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s",
            summary=SummaryDraft(content=f"user gave {SECRET}", summarizer="x", replaces=(first.message_id,)),
        ),
        trigger="manual",
        as_given=True,
    )
    assert red is not None
    conv.set_agent_state({"token": SECRET, "raw": [0, 1]})
    return {"first": first.message_id, "summary": red.summary_id}


def stored_tokens(store: CompleteStore, session_id: str = "s", agent_id: str = "a") -> list[str]:
    """Every sealed token the store under the encrypted layer holds for a conversation."""
    inner = store.inner if isinstance(store, EncryptedStore) else store
    with sealed_values_allowed():
        records = read_conversation(inner, session_id, agent_id)
    assert records is not None
    text = str(conversation_lines(records))
    return sorted({t for t in text.replace("'", '"').split('"') if t.startswith("clenc1.")})


class EncryptionContract(CapabilityContract):
    """Sealed at rest, opened exactly, refused with a wrong key, rotated in resumable batches, erasable."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (RESEAL, HISTORY, SESSIONS, TIME_TRAVEL, ERASURE, LINEAGE)

    def test_round_trip_is_exact_and_the_store_holds_no_plaintext(self, store: CompleteStore) -> None:
        sealed = encrypted(store)
        ids = encrypted_conversation(sealed)
        live = Conversation(sealed, "s", "a")
        assert SECRET in live.view[0].message.plain_text  # the summary, opened
        assert live.agent_state == {"token": SECRET, "raw": [0, 1]}
        history = sealed.history("s", "a")
        assert history[0].message.metadata["custom"]["note"] == SECRET
        assert history[1].message.content[0]["toolUse"]["input"] == {"q": SECRET}
        assert history[3].message.pinned
        (revision,) = sealed.revisions("s", "a")
        assert revision.original == [{"text": f"remember {SECRET}"}]
        assert [s.content for s in sealed.summaries("s", "a")] == [f"user gave {SECRET}"]
        assert SECRET in sealed.evictions("s", "a")[0].preview
        with sealed_values_allowed():
            inner = read_conversation(store, "s", "a")
        assert inner is not None
        assert SECRET not in str(conversation_lines(inner))
        assert ids["summary"] in {s.summary_id for s in inner.summaries}  # ids stay clear
        assert [h.message.message_id for h in inner.messages] == [h.message.message_id for h in history]

    def test_a_wrong_or_missing_key_is_a_typed_error(self, store: CompleteStore) -> None:
        encrypted_conversation(encrypted(store))
        with pytest.raises(EncryptionError, match="does not open"):
            encrypted(store, ("k1", OTHER)).load("s", "a")
        with pytest.raises(EncryptionKeyMissing) as missing:
            encrypted(store, ("k9", OTHER)).history("s", "a")
        assert missing.value.key_id == "k1"
        assert [i.session_id for i in store.sessions()] == ["s"]  # listings are clear

    def test_rotation_stopped_midway_resumes_and_finishes(self, store: CompleteStore) -> None:
        encrypted_conversation(encrypted(store))
        before = stored_tokens(store)
        assert {key_id_of(t) for t in before} == {"k1"}
        both = encrypted(store, ("k2", K2), ("k1", K1))
        batches = 0

        def stop_after_two(_applied: int) -> None:
            nonlocal batches
            batches += 1
            if batches == 2:
                raise KeyboardInterrupt  # as a Ctrl-C between two batches

        with pytest.raises(KeyboardInterrupt):
            rotate(both, batch_size=1, on_batch=stop_after_two)
        census = key_census(both, "s")
        assert census.get("k2"), census  # half-way: both keys in use
        assert census.get("k1"), census
        assert both.history("s", "a")  # and everything still opens
        done = rotate(both, batch_size=3)
        assert done.resealed == len(before) - 2
        assert rotate(both).resealed == 0  # nothing left
        assert set(key_census(both, "s")) == {"k2"}
        new_only = encrypted(store, ("k2", K2))
        assert Conversation(new_only, "s", "a").agent_state == {"token": SECRET, "raw": [0, 1]}
        assert not set(before) & set(stored_tokens(store))
        assert CLEAR not in key_census(both, "s")

    def test_erase_after_rotation_removes_the_sealed_bytes(self, store: CompleteStore) -> None:
        ids = encrypted_conversation(encrypted(store))
        with sealed_values_allowed():
            old = sealed_token(store.entries("s", "a", [ids["first"]])[0].message.content)
        both = encrypted(store, ("k2", K2), ("k1", K1))
        rotate(both)
        with sealed_values_allowed():
            new = sealed_token(store.entries("s", "a", [ids["first"]])[0].message.content)
        assert old
        assert new
        assert old != new
        erase(both, "s", ids["first"], reason="asked")
        tokens = stored_tokens(store)
        assert old not in tokens
        assert new not in tokens
        (row,) = both.entries("s", "a", [ids["first"]])
        assert SECRET not in row.message.model_dump_json()
        assert all(SECRET not in s.content for s in both.summaries("s", "a"))
        assert both.revisions("s", "a") == []
