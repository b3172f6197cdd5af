"""A page of history costs the same wherever it lies: SQLite VM steps counted, first page against last."""

from __future__ import annotations

from collections.abc import Callable

from contextledger.model.paging import Page
from contextledger.stores.sql import SQLStore
from tests.sql.helpers import build_ledger


def _steps(store: SQLStore, read: Callable[[], object]) -> int:
    reader = store.reader
    assert reader is not None
    counted = [0]

    def step() -> int:
        counted[0] += 1
        return 0

    reader.connection.set_progress_handler(step, 1)
    try:
        read()
    finally:
        reader.connection.set_progress_handler(None, 1)
    return counted[0]


def _reading(store: SQLStore, page: Page) -> Callable[[], object]:
    return lambda: store.history("s", "a", page=page)


def test_a_page_reads_its_rows_only(sqlite_url: str) -> None:
    store = SQLStore.from_url(sqlite_url)
    build_ledger(store, "s", evicted=3_000, active=3_000)
    store.close()
    store = SQLStore.from_url(sqlite_url)  # reopened: served by the SQLite reader
    try:
        pages = {
            "first": Page(limit=50),
            "middle": Page(after=2_990, limit=50),  # across the evicted/active boundary
            "end": Page(after=5_900, limit=50),
            "newest": Page(last=50),
            "oldest before": Page(before=60, last=50),
        }
        steps = {name: _steps(store, _reading(store, page)) for name, page in pages.items()}
        whole = _steps(store, lambda: store.history("s", "a"))
        # Each page walks the index for its 50 rows (per status), whatever its position:
        # no sort of the rows past the cursor.
        assert max(steps.values()) < 2 * min(steps.values()), steps
        assert max(steps.values()) * 20 < whole, (steps, whole)
        assert [h.seq for h in store.history("s", "a", page=pages["middle"])] == list(range(2_991, 3_041))
    finally:
        store.close()
