"""A changeset commits all or nothing, checked key by key on the server."""

from __future__ import annotations

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, ContentRevision, SummaryDraft
from contextledger.errors import ConcurrencyConflict, DuplicateEntry, EntryNotFound, InvalidMessage, StoreError
from contextledger.model.messages import Message
from contextledger.model.records import SummaryEntry, ViewEntry
from contextledger.stores.redis.keys import ConversationKeys
from contextledger.testing.required import reduction
from tests.redis.conftest import Backend


def _seed(backend: Backend) -> list[Message]:
    msgs = [Message.user(f"m{i}") for i in range(4)]
    conv = Conversation(backend.store, "s", "a")
    conv.append(*msgs)
    conv.pin(msgs[1].message_id)
    return msgs


def _everything(msgs: list[Message], **overrides: object) -> Changeset:
    """A changeset touching every part of the layout; ``overrides`` spoil one part."""
    red = reduction("s")
    new = [Message.user("new1"), Message.assistant("new2")]
    fields: dict[str, object] = {
        "session_id": "s",
        "agent_id": "a",
        "expected_version": 2,
        "appends": tuple(ViewEntry(entry_id=m.message_id, seq=4 + i, message=m, tokens=3) for i, m in enumerate(new)),
        "evict": (msgs[2].message_id,),
        "revisions": (ContentRevision(message_id=msgs[3].message_id, content=[{"text": "short"}], tokens=1),),
        "summary": SummaryEntry(
            session_id="s",
            agent_id="a",
            seq=0,
            content="S",
            summarizer="t",
            reduction_id=red.reduction_id,
            replaces=(msgs[0].message_id,),
        ),
        "reduction": red,
        "pins": {msgs[1].message_id: False, new[0].message_id: True},
        "model_call_count": 5,
        "next_seq": 6,
        "manager_state": {"m": 1},
        "agent_state": {"a": 2},
    }
    fields.update(overrides)
    return Changeset.model_validate(fields)


@pytest.mark.parametrize(
    ("spoil", "error"),
    [
        ({"evict": ("no-such-entry",)}, EntryNotFound),
        ({"revisions": (ContentRevision(message_id="nope", content=[{"text": "x"}]),)}, EntryNotFound),
        ({"pins": {"nope": True}}, EntryNotFound),
        ({"expected_version": 1}, ConcurrencyConflict),
        ({"expected_version": 0}, ConcurrencyConflict),
    ],
)
def test_invalid_reference_after_appends_applies_nothing(
    backend: Backend, spoil: dict[str, object], error: type[Exception]
) -> None:
    msgs = _seed(backend)
    before = backend.dump()
    with pytest.raises(error):
        backend.store.commit(_everything(msgs, **spoil))
    assert backend.dump() == before


def test_appending_an_existing_id_applies_nothing(backend: Backend) -> None:
    msgs = _seed(backend)
    before = backend.dump()
    spoiled = _everything(msgs)
    appends = (*spoiled.appends, ViewEntry(entry_id=msgs[0].message_id, seq=9, message=msgs[0]))
    with pytest.raises(DuplicateEntry):
        backend.store.commit(spoiled.model_copy(update={"appends": appends}))
    assert backend.dump() == before


def test_the_valid_changeset_applies_everything(backend: Backend) -> None:
    msgs = _seed(backend)
    before = backend.dump()
    cs = _everything(msgs)
    assert backend.store.commit(cs) == 3
    snap = backend.store.load("s", "a")
    assert snap is not None
    assert [e.entry_id for e in snap.entries] == [
        cs.summary.summary_id if cs.summary else "",
        msgs[1].message_id,
        msgs[3].message_id,
        *(e.entry_id for e in cs.appends),
    ]
    assert [e.pinned for e in snap.entries] == [False, False, False, True, False]
    assert snap.entries[2].message.content == [{"text": "short"}]
    assert snap.entries[2].tokens == 1
    assert (snap.state.model_call_count, snap.state.next_seq) == (5, 6)
    assert (snap.state.manager_state, snap.state.agent_state) == ({"m": 1}, {"a": 2})
    assert backend.dump() != before


def test_a_key_of_the_wrong_type_fails_before_any_write(backend: Backend) -> None:
    # Redis does not roll a script back: a write failing half-way would leave part of
    # the changeset applied, so the script must check every key before its first write.
    msgs = _seed(backend)
    keys = ConversationKeys.of(backend.prefix, "s", "a")
    backend.client.set(keys.rev, "not a list")  # the revisions list is written late in the script
    before = backend.dump()
    with pytest.raises(StoreError, match="holds a string"):
        backend.store.commit(_everything(msgs))
    assert backend.dump() == before


def test_content_json_cannot_hold_is_rejected_before_sending(backend: Backend) -> None:
    msgs = _seed(backend)
    before = backend.dump()
    odd = Message(role="user", content=[{"toolResult": {"toolUseId": "t", "content": [{"json": {1, 2}}]}}])
    conv = Conversation(backend.store, "s", "a")
    with pytest.raises(InvalidMessage, match="JSON"):
        conv.append(odd)
    bad_revision = ContentRevision(message_id=msgs[0].message_id, content=[{"json": object()}])
    with pytest.raises(InvalidMessage):
        backend.store.commit(_everything(msgs, revisions=(bad_revision,)))
    assert backend.dump() == before
    assert [e.entry_id for e in conv.view] == [m.message_id for m in msgs]


def test_summary_draft_validation_is_not_bypassed() -> None:
    with pytest.raises(ValueError, match="at least one"):
        SummaryDraft(content="x", summarizer="t", replaces=())
