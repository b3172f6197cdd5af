"""SQLite: an erase while another process holds a read transaction says the bytes are pending, then settles.

The reader is a real second process on the standard library's driver; the database and
WAL files are scanned for the erased bytes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contextledger import Ledger, Message
from contextledger.errors import ErasurePending
from tests.lifecycle.scan import files

SECRET = "IBAN DE89 3704 0044 0532 0130 00 of Alan Turing"

READER = r"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN")
conn.execute("SELECT count(*) FROM cl_entries").fetchone()  # the read transaction holds its snapshot
print("reading", flush=True)
hold = float(sys.argv[2])
if hold < 0:
    sys.stdin.readline()  # until told
else:
    time.sleep(hold)
conn.execute("COMMIT")
conn.close()
print("done", flush=True)
"""


def _ledger(path: Path) -> str:
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        chat = ledger.conversation("s")
        (secret,) = chat.append(Message.user(f"pay to {SECRET}"))
        for i in range(40):  # many commits: many page images while the reader holds the WAL
            chat.append(Message.assistant(f"step {i}") if i % 2 == 0 else Message.user(f"q{i}"))
        return secret.message_id


def _reader(path: Path, hold: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, str(path), str(hold)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "reading"
    return proc


def test_a_long_reader_leaves_the_erasure_pending_until_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    secret = _ledger(path)
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        other = ledger.history("s")[1].message.message_id
        reader = _reader(path, -1)
        try:
            ledger.erase("s", other, reason="warm-up")  # page images pile up in the WAL behind the reader
            erasure = ledger.erase("s", secret, reason="GDPR 9", settle_timeout=0.5)
            assert erasure.pending is not None
            assert "read transaction" in erasure.pending
            assert "settle_erasure" in erasure.pending
            assert not erasure.complete
            with pytest.raises(ErasurePending, match="read transaction"):
                erasure.raise_if_incomplete()
            assert SECRET.encode() in files(tmp_path)  # truly still on disk: the report is not a formality
            assert ledger.settle_erasure(timeout=0.2) is not None
        finally:
            assert reader.stdin is not None
            reader.stdin.write("\n")
            reader.stdin.flush()
            reader.wait(30)
        assert ledger.settle_erasure(timeout=5) is None
        assert SECRET.encode() not in files(tmp_path)
        assert [h.message.plain_text for h in ledger.history("s")][:1] == ["[erased]"]


def test_a_reader_that_ends_within_the_wait_lets_the_erasure_complete(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    secret = _ledger(path)
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        reader = _reader(path, 0.5)
        try:
            erasure = ledger.erase("s", secret, reason="GDPR 10", settle_timeout=20)
        finally:
            reader.wait(30)
        assert erasure.pending is None
        assert erasure.complete
        assert SECRET.encode() not in files(tmp_path)
