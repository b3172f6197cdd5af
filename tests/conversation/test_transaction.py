"""The transaction alone: one commit per write, the pending count, conflicts, lost replies, riding writes."""

from __future__ import annotations

import time

import pytest

from contextledger.core.changeset import Edit
from contextledger.errors import CommitOutcomeUnknown, ConcurrencyConflict
from contextledger.model.messages import Message
from tests.conversation.helpers import RecordingStore, compose
from tests.managers.helpers import chat
from tests.plugins.faults import lossy_memory


def test_an_edit_is_one_commit_at_the_version_read() -> None:
    store = RecordingStore()
    transaction = compose(store).transaction
    messages = chat(3)
    assert transaction.edit(lambda _view: Edit(appends=tuple(messages))) is None
    assert [c.expected_version for c in store.committed] == [0]
    assert transaction.state.version == 1
    assert transaction.view.ids == [m.message_id for m in messages]
    assert store.load("s", "default") is not None


def test_nothing_to_do_writes_nothing() -> None:
    store = RecordingStore()
    transaction = compose(store).transaction
    assert transaction.edit(lambda _view: None) is None
    assert transaction.edit(lambda _view: Edit()) is None
    assert store.attempts == 0
    assert transaction.state.version == 0


def test_a_pending_count_commits_alone_unless_deferred() -> None:
    store = RecordingStore()
    transaction = compose(store).transaction
    transaction.announce_call(defer=False)
    transaction.calls.preparing = False
    transaction.commit_count()
    assert [c.model_call_count for c in store.committed] == [1]
    transaction.announce_call(defer=True)
    transaction.calls.preparing = False
    transaction.commit_count()
    assert len(store.committed) == 1  # deferred: nothing written yet
    assert transaction.model_call_count == 2
    transaction.edit(lambda _view: Edit(appends=(Message.assistant("answer"),)))
    assert [c.model_call_count for c in store.committed] == [1, 2]  # the count rode with the answer
    assert store.committed[-1].from_call == 3  # the answer is input of the next call
    assert transaction.calls.pending == 0


def test_a_call_prepared_again_before_it_was_handed_counts_once() -> None:
    transaction = compose(RecordingStore()).transaction
    transaction.announce_call(defer=True)
    transaction.announce_call(defer=True)
    assert transaction.model_call_count == 1
    transaction.calls.preparing = False
    transaction.announce_call(defer=True)
    assert transaction.model_call_count == 2


def test_conflicts_rebuild_on_a_fresh_read_then_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    store = RecordingStore()
    transaction = compose(store, max_retries=3).transaction
    built: list[int] = []

    def build(view: object) -> Edit:
        built.append(transaction.state.version)
        return Edit(appends=(Message.user(f"m{len(built)}"),))

    store.conflicts = 2
    transaction.edit(build)
    assert len(built) == 3
    assert len(sleeps) == 2
    assert len(store.committed) == 1
    store.conflicts = 4  # more than max_retries + 1 attempts can survive
    with pytest.raises(ConcurrencyConflict):
        transaction.edit(build)
    assert len(store.committed) == 1  # nothing applied
    assert len(sleeps) == 2 + 3


def test_a_lost_reply_is_settled_by_the_next_write_and_applies_once() -> None:
    lossy = lossy_memory()
    transaction = compose(lossy.store).transaction  # type: ignore[arg-type]
    lossy.arm(apply=True, then_down=True)  # applied, the reply lost, then the store unreachable
    first = Message.user("first")
    with pytest.raises(CommitOutcomeUnknown):
        transaction.edit(lambda _view: Edit(appends=(first,)))
    lossy.restore()
    second = Message.user("second")
    transaction.edit(lambda _view: Edit(appends=(second,)))
    ids = [e.message.message_id for e in lossy.store.history("s", "default")]
    assert ids == [first.message_id, second.message_id]
    assert transaction.view.ids == ids


def test_a_lost_reply_that_never_applied_is_sent_again() -> None:
    lossy = lossy_memory()
    transaction = compose(lossy.store).transaction  # type: ignore[arg-type]
    lossy.arm(apply=False, then_down=True)  # lost before it applied, then the store unreachable
    first = Message.user("first")
    with pytest.raises(CommitOutcomeUnknown):
        transaction.edit(lambda _view: Edit(appends=(first,)))
    lossy.restore()
    transaction.edit(lambda _view: None)  # nothing of its own: settling is the write
    assert [e.message.message_id for e in lossy.store.history("s", "default")] == [first.message_id]


def test_a_riding_write_shares_the_first_commit_or_commits_alone_at_the_end() -> None:
    store = RecordingStore()
    transaction = compose(store).transaction
    answer = Message.assistant("answer")
    with transaction.riding(lambda _view: Edit(appends=(answer,))):
        pass
    assert [[a.entry_id for a in c.appends] for c in store.committed] == [[answer.message_id]]
    late = Message.assistant("late")
    with transaction.riding(lambda _view: Edit(appends=(late,))):
        transaction.edit(lambda view: Edit(agent_state={"seen": len(view)}))
    assert len(store.committed) == 2  # one changeset for both
    assert [a.entry_id for a in store.committed[-1].appends] == [late.message_id]
    assert store.committed[-1].agent_state == {"seen": 2}  # built on the view the riding write leaves
    assert transaction.view.ids[-1] == late.message_id
