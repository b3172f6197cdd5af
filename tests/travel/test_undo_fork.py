"""Undo and fork through the public API: a bad summary rolled back, typed errors, the CLI."""

from __future__ import annotations

import pytest

from contextledger import Ledger, Message
from contextledger.errors import (
    ModelCallNotFound,
    ReductionNotFound,
    SessionExists,
    SessionNotFound,
    UndoConflict,
)
from contextledger.managers import SummarizingConversationManager
from contextledger.stores.capabilities import CompleteStore
from tests.cli.conftest import Invoke
from tests.managers.helpers import overflow


def texts(view: object) -> list[str]:
    return [e.message.plain_text for e in view]  # type: ignore[attr-defined]


def test_a_summarizer_that_wrote_nonsense_is_rolled_back(store: CompleteStore) -> None:
    ledger = Ledger(store)
    chat = ledger.conversation(
        "s",
        manager=SummarizingConversationManager(
            summarizer=lambda entries: "banana banana", summary_ratio=0.5, preserve_recent_messages=2
        ),
    )
    chat.append(*(Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(8)))
    chat.before_model_call()
    before = texts(chat.view)
    assert chat.after_model_call(overflow()) is True
    assert "banana banana" in texts(chat.view)
    (bad,) = ledger.reductions("s")
    undo = chat.undo(bad.reduction_id)
    assert texts(chat.view) == before
    assert texts(ledger.conversation("s").view) == before  # committed: a restart reads it
    assert [(r.strategy, r.trigger) for r in ledger.reductions("s")] == [
        ("summarizing", "reactive"),
        ("undo", "manual"),
    ]
    assert undo.detail == f"undo of {bad.reduction_id}"
    # Nothing was lost either way: the nonsense summary is still queryable, evicted by the undo.
    (summary,) = ledger.summaries("s")
    assert (summary.content, summary.status, summary.evicted_by) == ("banana banana", "evicted", undo.reduction_id)
    # Undoing the undo redoes the summary.
    chat.undo(undo.reduction_id)
    assert "banana banana" in texts(chat.view)


def test_undo_typed_errors(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    chat = ledger.conversation("s")
    chat.append(Message.user("hi"))
    with pytest.raises(ReductionNotFound):
        chat.undo("nope")
    assert issubclass(UndoConflict, Exception)


def test_fork_typed_errors(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    chat = ledger.conversation("s")
    chat.append(Message.user("hi"))
    chat.before_model_call()
    ledger.conversation("taken").append(Message.user("x"))
    with pytest.raises(SessionNotFound):
        ledger.fork("nope", "new")
    with pytest.raises(SessionExists):
        ledger.fork("s", "taken")
    with pytest.raises(ModelCallNotFound):
        ledger.fork("s", "new", at_call=2)
    assert ledger.agents("new") == []  # nothing written by a refused fork
    ledger.fork("s", "new", at_call=1)
    origin = ledger.fork_origin("new")
    assert origin is not None
    assert (origin.session_id, origin.at_call) == ("s", 1)
    assert ledger.fork_origin("s") is None


def test_cli_show_names_the_origin_of_a_fork(invoke: Invoke, sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        chat = ledger.conversation("s")
        chat.append(Message.user("hi"))
        chat.before_model_call()
        chat.append(Message.assistant("hello"))
        ledger.fork("s", "branch", at_call=1)
    result = invoke("show", "branch", "--url", sqlite_url)
    assert result.exit_code == 0, result.output
    assert "branch / default was forked from s / default at model call 1" in result.stdout
    assert "hello" not in result.stdout  # the reply came after call 1
    plain = invoke("show", "s", "--url", sqlite_url)
    assert "forked from" not in plain.stdout
