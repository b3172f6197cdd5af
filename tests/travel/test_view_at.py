"""``view_at``: the cuts it takes, its typed errors, what it reads, and ``show --at-call``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.errors import ConfigurationError, ModelCallNotFound, ReductionNotFound, SessionNotFound
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager
from contextledger.model.records import HistoryEntry
from contextledger.stores.base import AppendedBy
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.cli.conftest import Invoke
from tests.managers.helpers import overflow


def texts(view: Any) -> list[str]:
    return [e.message.plain_text for e in view]


def turns(ledger: Ledger, session: str, count: int, **options: Any) -> list[list[str]]:
    """``count`` turns, each one model call; returns the input of every call."""
    chat = ledger.conversation(session, manager=SlidingWindowConversationManager(**options))
    seen = []
    for turn in range(count):
        chat.append(Message.user(f"question {turn}"))
        chat.before_model_call()
        seen.append([m.plain_text for m in chat.messages])
        chat.append(Message.assistant(f"answer {turn}"))
    return seen


def test_each_call_gets_its_own_input(store: CompleteStore) -> None:
    ledger = Ledger(store)
    seen = turns(ledger, "s", 5, window_size=3, per_turn=True)
    for n, expected in enumerate(seen, start=1):
        assert texts(ledger.view_at("s", model_call=n)) == expected
    # The reply of call 5 is in the view now, not in the input of call 5.
    assert texts(ledger.conversation("s").view)[-1] == "answer 4"
    assert "answer 4" not in seen[-1]


def test_reduction_cut_is_the_view_it_left(store: CompleteStore) -> None:
    ledger = Ledger(store)
    chat = ledger.conversation("s", manager=SlidingWindowConversationManager(window_size=2))
    chat.append(*(Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)))
    reduction = chat.reduce()
    assert reduction is not None
    left = texts(chat.view)
    chat.append(Message.user("later"), Message.assistant("reply"))
    chat.reduce()
    assert texts(ledger.view_at("s", reduction=reduction.reduction_id)) == left


def test_summaries_and_truncations_are_shown_as_they_were(store: CompleteStore) -> None:
    ledger = Ledger(store)
    chat = ledger.conversation(
        "s",
        manager=SlidingWindowConversationManager(window_size=40, should_truncate_results=True, truncate_threshold=100),
    )
    chat.append(Message.user("go"), Message.tool_use("t1", "f", {}), Message.tool_result("t1", "x" * 400))
    chat.append(Message.assistant("done"), Message.user("next"))
    chat.before_model_call()
    before = texts(chat.view)
    assert chat.after_model_call(overflow()) is True  # reactive: truncates the old tool result
    assert ledger.revisions("s")
    chat.before_model_call()
    assert texts(chat.view) != before
    assert texts(ledger.view_at("s", model_call=1)) == before
    assert texts(ledger.view_at("s", model_call=2)) == texts(chat.view)
    summarizing = ledger.conversation(
        "z",
        manager=SummarizingConversationManager(
            summarizer=lambda e: f"summary of {len(e)}", summary_ratio=0.5, preserve_recent_messages=2
        ),
    )
    summarizing.append(*(Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(8)))
    summarizing.before_model_call()
    first = texts(summarizing.view)
    assert summarizing.after_model_call(overflow()) is True  # reactive: summarizes the older half
    summarizing.before_model_call()
    assert texts(ledger.view_at("z", model_call=1)) == first
    assert texts(ledger.view_at("z", model_call=2)) == texts(summarizing.view)
    assert any(e.kind == "summary" for e in ledger.view_at("z", model_call=2))


def test_at_a_moment(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    chat = ledger.conversation("s")
    chat.append(Message.user("one"))
    moment = datetime.now(UTC)
    chat.append(Message.user("two"))
    assert texts(ledger.view_at("s", at=moment)) == ["one"]
    assert texts(ledger.view_at("s", at=moment.replace(tzinfo=None))) == ["one"]  # naive is UTC
    assert texts(ledger.view_at("s", at=moment - timedelta(days=1))) == []


def test_typed_errors(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    turns(ledger, "s", 2, window_size=10)
    with pytest.raises(SessionNotFound):
        ledger.view_at("nope", model_call=1)
    for bad in (0, 3, -1):
        with pytest.raises(ModelCallNotFound, match="calls made: 2"):
            ledger.view_at("s", model_call=bad)
    with pytest.raises(ReductionNotFound):
        ledger.view_at("s", reduction="nope")
    with pytest.raises(ConfigurationError, match="exactly one"):
        ledger.view_at("s")
    with pytest.raises(ConfigurationError, match="exactly one"):
        ledger.view_at("s", model_call=1, at=datetime.now(UTC))
    with pytest.raises(ConfigurationError):
        ledger.view_at("s", model_call="1")  # type: ignore[arg-type]


class CountingStore(MemoryStore):
    """A memory store that records which message rows were read, and refuses whole-history reads."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        rows = super().entries(session_id, agent_id, ids, appended_by=appended_by)
        self.read += [h.message.message_id for h in rows]
        return rows

    def history(self, *args: Any, **kwargs: Any) -> list[HistoryEntry]:
        raise AssertionError("view_at must not read the whole history")


def test_reads_only_the_window_and_what_was_evicted_after_the_cut() -> None:
    store = CountingStore()
    ledger = Ledger(store)
    turns(ledger, "s", 30, window_size=4, per_turn=True)
    window = len(ledger.conversation("s").view)
    store.read.clear()
    ledger.view_at("s", model_call=28)
    evicted_after = {i for r in ledger.reductions("s") if r.from_call > 28 for i in r.evicted}
    assert len(store.read) <= window + len(evicted_after)
    assert len(store.read) < 20  # of 60 messages


def test_cli_show_at_call(invoke: Invoke, sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        seen = turns(ledger, "s", 3, window_size=3, per_turn=True)
    result = invoke("show", "s", "--url", sqlite_url, "--at-call", "2", "--json")
    assert result.exit_code == 0, result.output
    import json

    (document,) = json.loads(result.stdout)
    assert document["model_call"] == 2
    assert [e["message"]["content"][0]["text"] for e in document["entries"]] == seen[1]
    narrow = invoke("show", "s", "--url", sqlite_url, "--at-call", "2", env={"COLUMNS": "80"})
    assert narrow.exit_code == 0
    assert all(len(line) <= 80 for line in narrow.stdout.splitlines())
    assert "question 1" in narrow.stdout
    missing = invoke("show", "s", "--url", sqlite_url, "--at-call", "9")
    assert missing.exit_code == 5
    assert "no model call 9" in missing.output
