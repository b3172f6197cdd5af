"""Random against time-ordered ids on SQLite: WAL pages written and client CPU per append.

Two ledgers in one process append the same turns of four messages to many
conversations, interleaved (conversation by conversation, turn by turn), stepped
alternately with the order swapped every step so that drift on a shared machine hits
both alike:

* ``v4`` -- the message and commit ids the library made before: random UUIDs (version 4);
* ``v7`` -- the ids it makes now: time-ordered UUIDs (version 7, RFC 9562).

Pages written are counted exactly: every ``--every`` turns a side connection checkpoints
each database (``wal_checkpoint``, PASSIVE then TRUNCATE) and adds the number of frames the WAL
held (one frame per page a commit wrote; the store's own auto-checkpoint never fires, the
WAL staying under its 1,000 frames). The append is timed for this thread's CPU time and
wall time (medians). Printed: pages per turn, medians, the ratios v7/v4, the file sizes
and the load average before and after.

    python benchmarks/id_order.py                      # 50 conversations x 300 turns
    python benchmarks/id_order.py --conversations 20 --turns 100
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contenders.cl import native_turn
from contextledger import Ledger
from contextledger.model import ids, messages, records


def _v4_hex() -> str:
    """What the library made before: a random UUID (version 4) as hex, without a ``UUID`` object."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    return raw.hex()


def _v4_dashed() -> str:
    h = _v4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


GENERATORS: dict[str, tuple[Callable[[], str], Callable[[], str]]] = {
    "v4": (_v4_dashed, _v4_hex),
    "v7": (ids.random_uuid, ids.random_uuid_hex),
}


@contextmanager
def using(kind: str) -> Iterator[None]:
    """Make the library's message and record ids with the ``kind`` generators meanwhile."""
    dashed, hexed = GENERATORS[kind]
    # The builders new_message_id and new_id call, by the names their modules import.
    saved = getattr(messages, "random_uuid"), getattr(records, "random_uuid_hex")  # noqa: B009
    setattr(messages, "random_uuid", dashed)  # noqa: B010
    setattr(records, "random_uuid_hex", hexed)  # noqa: B010
    try:
        yield
    finally:
        setattr(messages, "random_uuid", saved[0])  # noqa: B010
        setattr(records, "random_uuid_hex", saved[1])  # noqa: B010


def _frames(path: Path) -> int:
    """Checkpoint ``path`` fully and return how many frames its WAL held."""
    conn = sqlite3.connect(path)
    try:
        # PASSIVE reports the frames; TRUNCATE (which reports zeros) then empties the WAL.
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        truncated = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    if busy or log != done or truncated[0]:
        raise RuntimeError(f"checkpoint of {path} incomplete: busy={busy} log={log} done={done}")
    return int(log)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--every", type=int, default=50, help="turns between checkpoints (keep pages < 1,000)")
    args = parser.parse_args()
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {kind: Path(tmp) / f"{kind}.db" for kind in GENERATORS}
        ledgers = {kind: Ledger.connect(f"sqlite:///{path}") for kind, path in paths.items()}
        names = [f"conv-{c:03d}" for c in range(args.conversations)]
        convs = {kind: [ledgers[kind].conversation(name, "agent") for name in names] for kind in GENERATORS}
        frames = dict.fromkeys(GENERATORS, 0)
        cpu: dict[str, list[float]] = {kind: [] for kind in GENERATORS}
        wall: dict[str, list[float]] = {kind: [] for kind in GENERATORS}
        for kind in GENERATORS:  # turn 0 creates the conversations: not counted
            with using(kind):
                for conv in convs[kind]:
                    conv.append(*native_turn(conv.session_id, 0))
            _frames(paths[kind])
        step = 0
        for n in range(1, args.turns + 1):
            for c, name in enumerate(names):
                order = list(GENERATORS) if step % 2 == 0 else list(reversed(GENERATORS))
                step += 1
                for kind in order:
                    with using(kind):
                        turn = native_turn(name, n)
                        conv = convs[kind][c]
                        c0, w0 = time.thread_time(), time.perf_counter()
                        conv.append(*turn)
                        w1, c1 = time.perf_counter(), time.thread_time()
                    cpu[kind].append(c1 - c0)
                    wall[kind].append(w1 - w0)
                if step % args.every == 0:
                    for kind in GENERATORS:
                        frames[kind] += _frames(paths[kind])
        for kind in GENERATORS:
            frames[kind] += _frames(paths[kind])
        sizes = {kind: paths[kind].stat().st_size for kind in GENERATORS}
        for ledger in ledgers.values():
            ledger.close()
    turns = args.conversations * args.turns
    shape = f"{args.conversations} conversations x {args.turns} turns of 4 messages, interleaved"
    print(f"{shape}; load {load_before} -> {_load()}")
    print(f"{'ids':4} {'pages/turn':>10} {'cpu us':>8} {'wall us':>8} {'file MB':>8}")
    for kind in GENERATORS:
        print(
            f"{kind:4} {frames[kind] / turns:10.2f} {statistics.median(cpu[kind]) * 1e6:8.0f}"
            f" {statistics.median(wall[kind]) * 1e6:8.0f} {sizes[kind] / 1e6:8.1f}"
        )
    ratio = {
        "pages": frames["v7"] / frames["v4"],
        "cpu": statistics.median(cpu["v7"]) / statistics.median(cpu["v4"]),
        "wall": statistics.median(wall["v7"]) / statistics.median(wall["v4"]),
        "file": sizes["v7"] / sizes["v4"],
    }
    print("v7/v4: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()))


if __name__ == "__main__":
    main()
