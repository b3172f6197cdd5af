"""Concurrency: several processes writing one conversation.

* 8 processes x 200 appends (40 by default) to one conversation: every append exactly
  once, each writer's appends in its own order.
* 4 processes mixing appends and reductions (300 appends each in soak mode, 40 by
  default): every append exactly once, every reduction consistent with what it evicted.

A ``ConcurrencyConflict`` that escapes the Conversation's own retries is counted (the
writer then retries the same message itself) and its rate reported.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger, Message, SlidingWindowConversationManager
from contextledger.errors import ConcurrencyConflict, DuplicateEntry
from tests.reliability.conftest import SOAK, Report

SESSION = "concurrent"
# The default run stays short; CONTEXTLEDGER_SOAK=1 runs the full counts the figures are quoted for.
WRITERS, APPENDS = 8, 200 if SOAK else 40
MIXED_WRITERS, MIXED_APPENDS, REDUCE_EVERY = 4, 300 if SOAK else 40, 8


def _writer(url: str, options: dict[str, Any], writer: int, appends: int, reduce_every: int, out: Queue[Any]) -> None:
    escaped = attempts = reductions = 0
    manager = SlidingWindowConversationManager(window_size=12) if reduce_every else None
    with Ledger.connect(url, **options) as ledger:
        conv = ledger.conversation(SESSION, manager=manager)
        for i in range(appends):
            message = Message.user(f"writer {writer} message {i}", message_id=f"w{writer}-{i:04d}")
            while True:
                attempts += 1
                try:
                    conv.append(message)
                    break
                except ConcurrencyConflict:
                    escaped += 1
                except DuplicateEntry:
                    break  # applied by an earlier attempt whose outcome looked unknown
            if reduce_every and i % reduce_every == reduce_every - 1:
                while True:
                    attempts += 1
                    try:
                        if conv.reduce("manual") is not None:
                            reductions += 1
                        break
                    except ConcurrencyConflict:
                        escaped += 1
    out.put((writer, escaped, attempts, reductions))


def _target(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'concurrent.db'}", {}
    if backend == "postgres":
        url: str = request.getfixturevalue("postgres_ledger_url")
        return url, {}
    url = request.getfixturevalue("redis_url")
    return url, {"key_prefix": f"conc-{uuid.uuid4().hex[:8]}"}


def _run(url: str, options: dict[str, Any], writers: int, appends: int, reduce_every: int) -> tuple[int, int, int]:
    Ledger.connect(url, **options).close()  # create the schema once, before the writers race
    context = multiprocessing.get_context("fork")
    out: Queue[Any] = context.Queue()
    procs = [
        context.Process(target=_writer, args=(url, options, w, appends, reduce_every, out), daemon=True)
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0, f"a writer failed with exit code {proc.exitcode}"
    return sum(r[1] for r in results), sum(r[2] for r in results), sum(r[3] for r in results)


def _check_exactly_once(url: str, options: dict[str, Any], writers: int, appends: int) -> int:
    with Ledger.connect(url, **options) as ledger:
        history = ledger.history(SESSION)
        ids = [h.message.message_id for h in history]
        assert len(ids) == len(set(ids)) == writers * appends, f"{len(ids)} entries, {len(set(ids))} distinct"
        for writer in range(writers):
            mine = [h.seq for h in history if h.message.message_id.startswith(f"w{writer}-")]
            assert mine == sorted(mine), f"writer {writer}'s appends out of order"
        reductions = {r.reduction_id: r for r in ledger.reductions(SESSION)}
        for entry in history:
            if entry.status == "evicted":
                assert entry.evicted_by in reductions
        for reduction in reductions.values():
            by_id = {h.message.message_id: h for h in history}
            for entry_id in reduction.evicted:
                assert by_id[entry_id].evicted_by == reduction.reduction_id
        return len(reductions)


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_eight_writers_append_exactly_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, report: Report
) -> None:
    url, options = _target(backend, request, tmp_path)
    started = time.monotonic()
    escaped, attempts, _ = _run(url, options, WRITERS, APPENDS, 0)
    _check_exactly_once(url, options, WRITERS, APPENDS)
    report(
        f"concurrency/{backend}: {WRITERS} processes x {APPENDS} appends, all exactly once; escaped "
        f"ConcurrencyConflict {escaped}/{attempts} = {escaped / attempts:.2%} ({time.monotonic() - started:.0f} s)"
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_mixed_appends_and_reductions(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, report: Report
) -> None:
    url, options = _target(backend, request, tmp_path)
    started = time.monotonic()
    escaped, attempts, reductions = _run(url, options, MIXED_WRITERS, MIXED_APPENDS, REDUCE_EVERY)
    committed = _check_exactly_once(url, options, MIXED_WRITERS, MIXED_APPENDS)
    assert committed == reductions
    report(
        f"mixed/{backend}: {MIXED_WRITERS} processes x {MIXED_APPENDS} appends + {reductions} reductions, all "
        f"exactly once; escaped ConcurrencyConflict {escaped}/{attempts} = {escaped / attempts:.2%} "
        f"({time.monotonic() - started:.0f} s)"
    )
