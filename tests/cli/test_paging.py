"""``contextledger history --last N`` / ``--limit N`` read N messages per agent, not the whole history."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger, Message, SlidingWindowConversationManager
from contextledger.stores.sql.read import records

from .conftest import Invoke


@pytest.fixture
def long_ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'long.db'}"
    with Ledger.connect(url) as ledger:
        chat = ledger.conversation("s")
        chat.append(*(Message.user(f"m{i}") for i in range(200)))
    return url


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The count of history rows each statement handed to the records, in order."""
    counts: list[int] = []
    original = records.history_entries

    def counted(rows: Iterable[Sequence[Any]], session_id: str, agent_id: str, json_text: Any) -> Any:
        found = list(rows)
        counts.append(len(found))
        return original(found, session_id, agent_id, json_text)

    monkeypatch.setattr(records, "history_entries", counted)
    return counts


@pytest.mark.parametrize(("option", "texts"), [("--last", ["m197", "m198", "m199"]), ("--limit", ["m0", "m1", "m2"])])
def test_a_count_reads_that_many_rows(
    invoke: Invoke, long_ledger: str, rows_read: list[int], option: str, texts: list[str]
) -> None:
    result = invoke("history", "s", "--url", long_ledger, option, "3", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert [row["message"]["content"][0]["text"] for row in shown] == texts
    assert rows_read == [3]


def test_without_a_count_every_row_is_read(invoke: Invoke, long_ledger: str, rows_read: list[int]) -> None:
    result = invoke("history", "s", "--url", long_ledger, "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 200
    assert rows_read == [200]


@pytest.fixture
def reduced_ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'reduced.db'}"
    with Ledger.connect(url) as ledger:
        chat = ledger.conversation("s", manager=SlidingWindowConversationManager(window_size=2))
        for turn in range(30):
            chat.append(Message.user(f"q{turn}"), Message.assistant(f"a{turn}"))
            chat.reduce("manual")
    return url


def test_reductions_and_evictions_read_that_many_rows(
    invoke: Invoke, reduced_ledger: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: dict[str, list[int]] = {"reductions": [], "evictions": []}
    for name in counts:
        original = getattr(records, name)

        def counted(rows: Iterable[Any], session_id: str, name: str = name, original: Any = original) -> Any:
            found = list(rows)
            counts[name].append(len(found))
            return original(found, session_id)

        monkeypatch.setattr(records, name, counted)
    with Ledger.connect(reduced_ledger) as ledger:
        newest = ledger.reductions("s")[-2:]
        evicted = ledger.evictions("s")[-2:]
    for name in counts:
        counts[name].clear()
    result = invoke("reductions", "s", "--url", reduced_ledger, "--last", "2", "--json")
    assert result.exit_code == 0, result.output
    assert [r["reduction_id"] for r in json.loads(result.output)] == [r.reduction_id for r in newest]
    result = invoke("evictions", "s", "--url", reduced_ledger, "--last", "2", "--json")
    assert result.exit_code == 0, result.output
    assert [e["entry_id"] for e in json.loads(result.output)] == [e.entry_id for e in evicted]
    assert counts == {"reductions": [2], "evictions": [2]}
