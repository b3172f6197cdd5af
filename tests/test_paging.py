"""Paging the history through the ledger: checked arguments, streams of pages, statements read per page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from contextledger import AsyncLedger, Ledger, Message
from contextledger.errors import ConfigurationError, InvalidPage
from contextledger.model.paging import Page, cursor
from contextledger.stores.capabilities import HISTORY
from contextledger.stores.sql import SQLStore
from tests.sql.helpers import capture_reads

BAD: list[dict[str, Any]] = [
    {"after": -1},
    {"before": "3"},
    {"limit": True},
    {"last": -2},
    {"limit": 1.5},
    {"limit": 2, "last": 2},
]


def _ledger(url: str, turns: int) -> Ledger:
    ledger = Ledger.connect(url)
    chat = ledger.conversation("s")
    for turn in range(turns):
        chat.append(Message.user(f"q{turn}"), Message.assistant(f"a{turn}"))
    return ledger


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_a_bad_cursor_or_count_is_a_typed_error_and_reads_nothing(tmp_path: Path, bad: dict[str, Any]) -> None:
    with _ledger(f"sqlite:///{tmp_path / 'l.db'}", 2) as ledger:
        with pytest.raises(InvalidPage):
            ledger.history("s", **bad)
        assert issubclass(InvalidPage, ConfigurationError)
        assert len(ledger.history("s")) == 4  # nothing lost


@pytest.mark.parametrize("page_size", [0, -1, True, "2"])
def test_a_bad_page_size_is_a_typed_error(page_size: Any) -> None:
    with Ledger.connect("memory://") as ledger, pytest.raises(InvalidPage):
        next(ledger.iter_history("s", page_size=page_size))


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_iter_history_streams_every_entry_once_in_order(tmp_path: Path, url: str) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}" if url == "sqlite" else url
    with _ledger(url, 10) as ledger:
        whole = ledger.history("s")
        for size in (1, 3, 7, 20, 1000):
            assert list(ledger.iter_history("s", page_size=size)) == whole
        assert list(ledger.iter_history("s", after=whole[4].seq, before=whole[15].seq, page_size=4)) == whole[5:15]
        assert list(ledger.iter_history("s", include_evicted=False, page_size=3)) == ledger.history(
            "s", include_evicted=False
        )


def test_each_page_is_one_statement_reading_the_page_only(tmp_path: Path) -> None:
    with _ledger(f"sqlite:///{tmp_path / 'l.db'}", 50) as ledger:
        store = ledger.store
        assert isinstance(store, SQLStore)
        with capture_reads(store) as reads:
            pages = [len(p) for p in _pages(ledger, 30)]
        assert pages == [30, 30, 30, 10]
        selects = [s.sql for s in reads.statements if s.sql.startswith("SELECT")]
        # One SELECT per page (the last one short), each bounded by seq and LIMIT: no offset scan.
        assert len(selects) == 4
        assert all("LIMIT 30" in sql for sql in selects)
        assert all("cl_entries.seq >" in sql for sql in selects[1:])


def _pages(ledger: Ledger, size: int) -> list[list[Any]]:
    pages = []
    after = None
    while True:
        page = ledger.history("s", after=after, limit=size)
        pages.append(page)
        if len(page) < size:
            return pages
        after = page[-1].seq


def test_last_reads_the_newest_rows_oldest_first(tmp_path: Path) -> None:
    with _ledger(f"sqlite:///{tmp_path / 'l.db'}", 5) as ledger:
        whole = ledger.history("s")
        assert ledger.history("s", last=3) == whole[-3:]
        assert ledger.history("s", before=whole[-3].seq, last=3) == whole[-6:-3]
        assert ledger.history("s", after=whole[2].seq, limit=2) == whole[3:5]
        assert HISTORY.of(ledger.store, "test").history("s", "default", page=Page.of(last=0)) == []


def test_async_iter_history_streams_the_same_entries(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with _ledger(url, 6) as ledger:
        whole = ledger.history("s")

    async def stream() -> list[Any]:
        async with await AsyncLedger.connect(url) as aledger:
            found = [entry async for entry in aledger.iter_history("s", page_size=4)]
            assert await aledger.history("s", last=2) == whole[-2:]
            with pytest.raises(InvalidPage):
                await aledger.history("s", limit=-1)
            return found

    assert asyncio.run(stream()) == whole


def test_pin_history_pages_through_the_ledger_sync_and_async(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with _ledger(url, 4) as ledger:
        chat = ledger.conversation("s")
        for entry in chat.view:
            chat.pin(entry.entry_id)
        chat.unpin(chat.view[0].entry_id)
        whole = ledger.pin_history("s")
        assert len(whole) == 9
        assert ledger.pin_history("s", last=3) == whole[-3:]
        assert ledger.pin_history("s", after=cursor(whole[2]), limit=2) == whole[3:5]
        assert ledger.pin_history("s", before=cursor(whole[2])) == whole[:2]
        store = ledger.store
        assert isinstance(store, SQLStore)
        with capture_reads(store) as reads:
            assert ledger.pin_history("s", after=cursor(whole[5]), limit=2) == whole[6:8]
        (select,) = [s.sql for s in reads.statements if s.sql.startswith("SELECT")]
        assert "LIMIT 2" in select
        for bad in ({"after": 3}, {"before": ("x",)}, {"after": (whole[0].at, "default", 1)}, {"last": -1}):
            with pytest.raises(InvalidPage):
                ledger.pin_history("s", **bad)
        assert ledger.pin_history("s") == whole  # nothing lost

    async def paged() -> list[Any]:
        async with await AsyncLedger.connect(url) as aledger:
            return list(await aledger.pin_history("s", after=cursor(whole[0]), last=2))

    assert asyncio.run(paged()) == whole[-2:]
