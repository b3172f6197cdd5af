"""A SQLite file store serves its listings on the reader: no engine statement, one snapshot, any thread.

(That the reader's listings equal the engine's is the property of
``test_reader_equivalence``.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from contextledger import Conversation, Message, SlidingWindowConversationManager
from contextledger.stores.base import AppendedBy
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.read import listings
from contextledger.stores.sql.read.runner import SQLiteRunner
from tests.sql.helpers import capture_reads, trace_sqlite


def _fill(store: SQLStore) -> Conversation:
    """A session of two agents with evictions, a pin and an unpin."""
    chat = Conversation(store, "s", "a", manager=SlidingWindowConversationManager(window_size=4))
    for turn in range(6):
        chat.append(Message.user(f"question {turn}"), Message.assistant(f"answer {turn}"))
    chat.pin_index(len(chat.view) - 1, True)
    chat.pin_index(len(chat.view) - 1, False)
    chat.reduce("manual")
    Conversation(store, "s", "b").append(Message.user("hello"))
    return chat


def _listings(store: SQLStore) -> dict[str, Callable[[], list[Any]]]:
    """Every listing the inspector uses, as the store serves it."""
    ids = [h.message.message_id for h in store.history("s", "a")]
    return {
        "history": lambda: store.history("s", "a"),
        "entries": lambda: store.entries("s", "a", ids, appended_by=AppendedBy(version=3)),
        "summaries": lambda: store.summaries("s"),
        "agents": lambda: store.agents("s"),
        "sessions": lambda: store.sessions(),
        "evictions": lambda: store.evictions("s", "a", trigger="manual"),
        "reductions": lambda: store.reductions("s"),
        "revisions": lambda: store.revisions("s", "a"),
        "pin_history": lambda: store.pin_history("s"),
    }


def test_every_listing_runs_on_the_reader(sqlite_store: SQLStore) -> None:
    _fill(sqlite_store)
    assert sqlite_store.reader is not None
    for name, listing in _listings(sqlite_store).items():
        with trace_sqlite(sqlite_store) as engine, capture_reads(sqlite_store) as reader:
            listing()
        assert engine.statements == [], name
        assert reader.work, name
        # One read transaction around the listing's statements.
        assert [s.sql for s in reader.statements][:: len(reader.statements) - 1] == ["BEGIN", "COMMIT"], name


def test_a_listing_reads_one_commit(sqlite_store: SQLStore) -> None:
    chat = _fill(sqlite_store)
    reader = sqlite_store.reader
    assert reader is not None
    with reader.read() as conn:
        run = SQLiteRunner(conn)
        before = listings.history(run, "s", "a", include_evicted=True)
        chat.append(Message.user("written meanwhile"))  # the engine's connection commits
        again = listings.history(run, "s", "a", include_evicted=True)
        pins = listings.pin_history(run, "s", None)
    assert again == before
    assert len(sqlite_store.history("s", "a")) == len(before) + 1
    assert pins == sqlite_store.pin_history("s")


def test_listings_from_many_threads_share_the_reader(sqlite_store: SQLStore) -> None:
    _fill(sqlite_store)
    listings = _listings(sqlite_store)
    expected = {name: listing() for name, listing in listings.items()}
    failures: list[BaseException] = []
    start = threading.Barrier(6)

    def work() -> None:
        start.wait()
        try:
            for _ in range(15):
                for name, listing in listings.items():
                    assert listing() == expected[name], name
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
