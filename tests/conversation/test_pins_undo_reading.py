"""Pins, undo and the reader, each over a bare transaction."""

from __future__ import annotations

import pytest

from contextledger.conversation.pins import Pins
from contextledger.conversation.undo import UNDO_STRATEGY, Undo
from contextledger.core.changeset import Edit, ReductionPlan
from contextledger.errors import PinError, UndoConflict
from tests.conversation.helpers import RecordingStore, compose
from tests.managers.helpers import chat, overflow


def test_each_pin_change_is_one_commit_and_a_pin_that_changes_nothing_writes_nothing() -> None:
    store = RecordingStore()
    transaction = compose(store).transaction
    transaction.edit(lambda _view: Edit(appends=tuple(chat(4))))
    pins = Pins(transaction)
    entry_id = pins.pin_index(1)
    assert transaction.view[1].message.pinned
    pins.pin(entry_id)  # already pinned
    pins.unpin(entry_id, source="host")
    assert [c.pins for c in store.committed[1:]] == [{entry_id: True}, {entry_id: False}]
    assert [(e.pinned, e.source) for e in store.pin_history("s", "default")] == [(True, "api"), (False, "host")]
    with pytest.raises(PinError):
        pins.pin_index(9)
    with pytest.raises(PinError):
        pins.pin("no-such-entry")
    assert len(store.committed) == 3


def test_an_undo_is_one_reduction_that_brings_the_evicted_back() -> None:
    store = RecordingStore()
    transaction = compose(store).transaction
    transaction.edit(lambda _view: Edit(appends=tuple(chat(6))))
    before = transaction.view.ids
    evicted = transaction.edit(
        lambda view: Edit(plan=ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:2])), trigger="manual")
    )
    assert evicted is not None
    assert transaction.view.ids == before[2:]
    undo = Undo(transaction)
    reverted = undo.undo(evicted.reduction_id)
    assert reverted.strategy == UNDO_STRATEGY
    assert transaction.view.ids == before
    assert len(store.committed) == 3
    with pytest.raises(UndoConflict):
        undo.undo(evicted.reduction_id)  # undone already: the undo depends on it


def test_the_reader_shows_the_pending_count_the_version_and_overflows() -> None:
    store = RecordingStore()
    parts = compose(store)
    parts.transaction.edit(lambda _view: Edit(appends=tuple(chat(2))))
    parts.transaction.announce_call(defer=True)
    context = parts.reader.context(limit=1000)
    assert (context.model_call_count, context.version, context.context_window_limit) == (1, 1, 1000)
    assert context.view is parts.transaction.view
    assert parts.reader.is_overflow(overflow())
    assert not parts.reader.is_overflow(ValueError("x"))
    request = parts.reader.request("manual", projected_input_tokens=7)
    assert (request.model_call_count, request.projected_input_tokens) == (1, 7)
    assert parts.reader.context(error=overflow()).overflow
