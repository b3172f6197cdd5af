"""Two OS processes append to one conversation at once: conflicts happen, are retried, nothing is lost."""

from __future__ import annotations

import logging
import multiprocessing
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from contextledger import Changeset, ConcurrencyConflict, Message
from contextledger.conversation.conversation import Conversation
from contextledger.stores.sql import SQLStore

PER_WRITER = 40
WRITERS = ("w0", "w1")


class _RetryCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "version conflict" in record.getMessage():
            self.retries += 1


def _writer(url: str, name: str, barrier: Barrier, results: Queue[Any]) -> None:
    """Runs in a child process: append PER_WRITER messages, report conflicts and retries."""
    counter = _RetryCounter()
    log = logging.getLogger("contextledger.conversation.conversation")
    log.addHandler(counter)
    log.setLevel(logging.INFO)
    store = SQLStore.from_url(url)
    conflicts = 0
    commit = store.commit

    def counting_commit(changeset: Changeset) -> int:
        nonlocal conflicts
        try:
            return commit(changeset)
        except ConcurrencyConflict:
            conflicts += 1
            raise

    store.commit = counting_commit  # type: ignore[method-assign]
    try:
        conversation = Conversation(store, "race", "a", max_retries=10_000)
        barrier.wait(timeout=60)
        for i in range(PER_WRITER):
            conversation.append(Message.user(f"{name}-{i}"))
        results.put((name, conflicts, counter.retries))
    finally:
        store.close()


def test_two_processes_lose_nothing_and_retry_conflicts(ledger_url: str) -> None:
    seed_store = SQLStore.from_url(ledger_url)
    Conversation(seed_store, "race", "a").append(Message.user("seed"))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(WRITERS))
    results: Queue[Any] = context.Queue()
    processes = [context.Process(target=_writer, args=(ledger_url, name, barrier, results)) for name in WRITERS]
    for process in processes:
        process.start()
    try:
        reports = [results.get(timeout=180) for _ in WRITERS]
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():  # only our own children, by handle
                process.terminate()
                process.join(timeout=10)
    assert [p.exitcode for p in processes] == [0, 0]

    snap = seed_store.load("race", "a")
    seed_store.close()
    assert snap is not None
    texts = [e.message.plain_text for e in snap.entries]
    assert len(texts) == 1 + len(WRITERS) * PER_WRITER
    assert sorted(texts) == sorted(["seed"] + [f"{w}-{i}" for w in WRITERS for i in range(PER_WRITER)])
    for w in WRITERS:
        assert [t for t in texts if t.startswith(f"{w}-")] == [f"{w}-{i}" for i in range(PER_WRITER)]
    assert [e.seq for e in snap.entries] == list(range(len(texts)))
    assert snap.state.next_seq == len(texts)

    conflicts = {name: c for name, c, _ in reports}
    retries = {name: r for name, _, r in reports}
    # The writers really raced: commits were rejected, and every rejection was re-planned.
    # (Both read version 1 before the barrier, so at least their first commits collide.)
    assert sum(conflicts.values()) > 0, reports
    assert retries == conflicts
    # One version per successful commit: the seed plus one append each.
    assert snap.state.version == 1 + len(WRITERS) * PER_WRITER
