"""Inline appends on SQLite leave the WAL's checkpoints to a worker: the loop's thread never waits on a disk flush."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.stores.sql.write.sqlite_writer import CHECKPOINT_AFTER

APPENDS = 10 * CHECKPOINT_AFTER


def test_every_checkpoint_after_th_inline_append_runs_on_a_worker_and_the_wal_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    wal = path.with_name(path.name + "-wal")
    filler = "x" * 1500  # a page or so a message: the run of appends passes SQLite's checkpoint threshold

    async def main() -> tuple[int, int, int]:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:
            conversation = await ledger.conversation("wal")
            await conversation.append(Message.user("first"))  # a conversation's first commit: on a worker
            calls, inline = ledger.runner.calls, ledger.runner.inline
            for n in range(APPENDS):
                await conversation.append(Message.user(f"q{n} {filler}"), Message.assistant(f"a{n} {filler}"))
            # Read while the ledger is open: closing its last connection checkpoints and removes the WAL.
            return ledger.runner.calls - calls, ledger.runner.inline - inline, wal.stat().st_size

    hops, inline, wal_bytes = asyncio.run(main())
    # After each run of CHECKPOINT_AFTER commits with the auto-checkpoint off, one append
    # goes to a worker (a checkpoint then due runs there); the others stay inline.
    assert hops == APPENDS // (CHECKPOINT_AFTER + 1)
    assert inline == APPENDS - hops
    with closing(sqlite3.connect(path)) as raw:
        page = int(raw.execute("PRAGMA page_size").fetchone()[0])
    # The WAL file does not shrink, so its size is the most it held: without checkpoints
    # every append's pages (several each here, thousands in all); with them, SQLite's
    # threshold (1,000 pages) and at most one run of appends beyond it.
    assert wal_bytes // page < 1000 + 10 * CHECKPOINT_AFTER, wal_bytes // page
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        assert len(ledger.conversation("wal").messages) == 1 + 2 * APPENDS
