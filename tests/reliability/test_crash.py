"""Crash consistency: SIGKILL the worker (and sometimes the server) at random moments.

10 kills per backend by default, 100 with ``CONTEXTLEDGER_SOAK=1``. On PostgreSQL and
Redis every fourth kill also crashes the server at the same moment (SIGKILL, then a
restart that replays the WAL / AOF). After every kill the checker of
:mod:`tests.reliability.workload` proves nothing acknowledged was lost and nothing was
half-applied, reading the ledger with a fresh store.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger
from contextledger.stores.capabilities import complete
from tests.reliability.conftest import SOAK, Report, fresh_database
from tests.reliability.servers import DurablePostgres, DurableRedis
from tests.reliability.workload import Journal, check, run_worker

KILLS = 100 if SOAK else 10
SERVER_KILL_EVERY = 4


def _target(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any], Any]:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'crash.db'}", {}, None
    if backend == "postgres":
        pg: DurablePostgres = request.getfixturevalue("durable_postgres")
        return fresh_database(pg), {}, pg
    redis: DurableRedis = request.getfixturevalue("durable_redis")
    return redis.url, {"key_prefix": f"crash-{uuid.uuid4().hex[:8]}"}, redis


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_sigkill_at_random_moments_loses_nothing(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, report: Report
) -> None:
    url, options, server = _target(backend, request, tmp_path)
    journal_path = tmp_path / "journal.jsonl"
    rng = random.Random(20261123)
    context = multiprocessing.get_context("fork")
    server_kills = operations = 0
    started = time.monotonic()
    counts: dict[str, int] = {}
    for kill in range(KILLS):
        worker = context.Process(target=run_worker, args=(url, options, str(journal_path), kill), daemon=True)
        worker.start()
        time.sleep(rng.uniform(0.25, 1.0))
        crash_server = server is not None and kill % SERVER_KILL_EVERY == SERVER_KILL_EVERY - 1
        assert worker.pid is not None
        if worker.exitcode is not None:
            pytest.fail(f"kill {kill}: the worker died on its own with exit code {worker.exitcode}")
        os.kill(worker.pid, signal.SIGKILL)
        if crash_server:
            server.crash()
            server_kills += 1
        worker.join(timeout=30)
        assert worker.exitcode == -signal.SIGKILL, f"kill {kill}: worker exit code {worker.exitcode}"
        if crash_server:
            server.start()
        journal = Journal.read(journal_path)
        with Ledger.connect(url, **options) as ledger:
            counts = check(ledger.store, journal)
        operations = journal.operations
    elapsed = time.monotonic() - started
    assert operations > KILLS, "the workload hardly ran between kills"
    report(
        f"crash/{backend}: {KILLS} SIGKILLs ({server_kills} with the server), {operations} acknowledged "
        f"operations, {counts.get('entries', 0)} entries, {counts.get('reductions', 0)} reductions, "
        f"{counts.get('summaries', 0)} summaries; lost or partial: 0 ({elapsed:.0f} s)"
    )


def test_the_checker_notices_loss_partial_appends_and_a_wrong_count(tmp_path: Path) -> None:
    from contextledger import Message
    from tests.reliability.workload import SESSION

    with Ledger.connect(f"sqlite:///{tmp_path / 'checker.db'}") as ledger:
        conv = ledger.conversation(SESSION)
        kept = Message.user("kept", message_id="m1")
        conv.append(kept)
        ghost = Message.user("never stored", message_id="ghost").to_record()
        journal = Journal(acked={"m1": kept.to_record()})
        check(complete(ledger.store, "tests"), journal)
        with pytest.raises(AssertionError, match="lost"):
            check(complete(ledger.store, "tests"), Journal(acked={"m1": kept.to_record(), "ghost": ghost}))
        with pytest.raises(AssertionError, match="partial"):
            check(complete(ledger.store, "tests"), Journal(acked={}, in_flight=[[kept.to_record(), ghost]]))
        with pytest.raises(AssertionError, match="model_call_count"):
            check(complete(ledger.store, "tests"), Journal(acked={"m1": kept.to_record()}, model_calls=3))
        with pytest.raises(AssertionError, match="nobody appended"):
            check(complete(ledger.store, "tests"), Journal())
