"""What one SQLite append writes: WAL frames (pages) per turn, by table and index, ledger vs plain.

An append in WAL mode with ``synchronous=NORMAL`` costs the client little but the
frames it writes to the WAL (each page the transaction dirtied, written once at commit
as a frame header and the page: two ``pwrite`` calls), so pages per turn are the
physical part of an append's CPU. For each contender this appends ``--warm`` turns of
four messages (the conversation's history grows, as an agent's does), appends ``--turns`` more,
25 at a time after a checkpoint that empties the WAL, and reads the WAL's frame headers
after each 25: each names the page it holds, which ``dbstat`` maps to its table or index.

* ``ledger`` -- ``Conversation.append(*messages)`` on a new SQLite ledger;
* ``plain`` -- the bare driver on one table with one index (``contenders/raw.py``).

    python benchmarks/wal_pages.py                     # 300 turns of history, 200 measured
    python benchmarks/wal_pages.py --warm 2000 --turns 400

No timing: the figures are counts, the same on any machine for the same sizes (the
random message ids of the ledger move its unique index's share a little between runs).
"""

from __future__ import annotations

import argparse
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _protocol import turn
from contenders.cl import native_turn
from contenders.raw import RawSQLite
from contextledger import Ledger

_WAL_HEADER = 32
_FRAME_HEADER = 24


def frames_by_object(path: Path) -> Counter[str]:
    """The pages held by the WAL of the database at ``path``, counted by the table or index owning each."""
    data = Path(f"{path}-wal").read_bytes()
    (page_size,) = struct.unpack(">I", data[8:12])
    frames = range(_WAL_HEADER, len(data) - page_size - _FRAME_HEADER + 1, page_size + _FRAME_HEADER)
    pages = [struct.unpack(">I", data[at : at + 4])[0] for at in frames]
    with sqlite3.connect(path) as conn:
        owner = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    return Counter(owner.get(page, "(free)") for page in pages)


def checkpoint(path: Path) -> None:
    """Copy the WAL into the database and empty it."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# Turns per WAL read: well below the thousand pages at which a commit checkpoints the WAL
# on its own (and starts it over, taking the frames counted so far with it).
_CHUNK = 25


def measure(path: Path, append: Callable[[int], object], warm: int, turns: int) -> Counter[str]:
    """Frames per object written by ``turns`` appends after ``warm`` (totals, not per turn)."""
    for n in range(warm):
        append(n)
    found: Counter[str] = Counter()
    for start in range(warm, warm + turns, _CHUNK):
        checkpoint(path)
        for n in range(start, min(start + _CHUNK, warm + turns)):
            append(n)
        found += frames_by_object(path)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--warm", type=int, default=300, help="turns appended before measuring")
    parser.add_argument("--turns", type=int, default=200, help="turns measured")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        ledger_path = Path(directory) / "ledger.db"
        with Ledger.connect(f"sqlite:///{ledger_path}") as ledger:
            conversation = ledger.conversation("wal", "agent")
            found = {
                "ledger": measure(
                    ledger_path, lambda n: conversation.append(*native_turn("wal", n)), args.warm, args.turns
                )
            }
        plain_path = Path(directory) / "plain.db"
        plain = RawSQLite()
        plain.setup("append", {"path": str(plain_path), "session": "wal"})
        try:
            found["plain"] = measure(plain_path, lambda n: plain.write(turn("wal", n)), args.warm, args.turns)
        finally:
            plain.close()
    print(
        f"WAL frames (pages) per turn of four messages after {args.warm} turns, over {args.turns} turns; "
        f"SQLite {sqlite3.sqlite_version}, page size 4096 unless the file says otherwise."
    )
    print()
    print("| contender | table or index | frames per turn |")
    print("|---|---|---:|")
    for name, counts in found.items():
        for owner, count in counts.most_common():
            print(f"| {name} | {owner} | {count / args.turns:.2f} |")
        print(f"| {name} | **total** | **{sum(counts.values()) / args.turns:.2f}** |")


if __name__ == "__main__":
    main()
