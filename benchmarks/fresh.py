"""A fresh process's restore on SQLite: import, connect, open the conversation, read its context.

    python benchmarks/fresh.py                       # 100,000 entries, a 40-message window, 20 rounds
    python benchmarks/fresh.py --db /tmp/big.db      # reuse (or build once) the ledger there
    python benchmarks/fresh.py --against ../old/src  # also run another source tree, interleaved

Each round starts one interpreter per contender, interleaved: ``python -c pass`` (the
interpreter's floor), pydantic imported and one model class defined (the floor of any
process that builds the library's records: a first model imports more of pydantic than
``from pydantic import BaseModel`` does), the child below, and with
``--against`` the same child on another checkout's ``src`` (put first on
``PYTHONPATH``). Prints the median and the fastest wall time of each, which heavy
packages the child imported, and the medians of the child's phases as it times them
itself: import, connect, open the conversation, read its context. Bytecode is cached
(a warm-up round runs first, with ``PYTHONDONTWRITEBYTECODE`` removed from the
children's environment).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _run import PYDANTIC_FLOOR

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from contextledger import Ledger
t1 = time.perf_counter()
ledger = Ledger.connect(sys.argv[1])
t2 = time.perf_counter()
conversation = ledger.conversation(sys.argv[3], "agent")
t3 = time.perf_counter()
messages = conversation.messages
t4 = time.perf_counter()
ledger.close()
assert len(messages) == int(sys.argv[2]), len(messages)
print({m: m in sys.modules for m in ("sqlalchemy", "alembic", "pydantic")})
phases = {"import": t1 - t0, "connect": t2 - t1, "open": t3 - t2, "read": t4 - t3}
print(json.dumps({name: seconds * 1000 for name, seconds in phases.items()}))
"""


def build(path: Path, session: str, entries: int, window: int) -> None:
    """A ledger of ``entries`` messages whose newest ``window`` are active."""
    from contenders.cl import bulk_load
    from contextledger import Ledger

    with Ledger.connect(f"sqlite:///{path}") as ledger:
        bulk_load(ledger.conversation(session, "agent"), total=entries, active=window)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--db", type=Path, default=None, help="the ledger file (built when missing)")
    parser.add_argument("--session", default="fresh", help="the session restored (agent 'agent')")
    parser.add_argument("--against", type=Path, default=None, help="another checkout's src directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        db = args.db or Path(directory) / "fresh.db"
        if not db.exists():
            started = time.perf_counter()
            build(db, args.session, args.entries, args.window)
            print(f"built {db} ({args.entries:,} entries) in {time.perf_counter() - started:.0f} s")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        child = [sys.executable, "-c", CHILD, f"sqlite:///{db}", str(args.window), args.session]
        contenders: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "python + pydantic, one model class": ([sys.executable, "-c", PYDANTIC_FLOOR], env),
            "contextledger": (child, env),
        }
        if args.against is not None:
            other = {**env, "PYTHONPATH": str(args.against.resolve())}
            contenders[f"contextledger ({args.against})"] = (child, other)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        phases: dict[str, dict[str, list[float]]] = {name: {} for name in contenders}
        imported: dict[str, str] = {}
        for round_ in range(args.rounds + 1):  # round 0 warms the bytecode caches
            for name, (argv, child_env) in contenders.items():
                started = time.perf_counter()
                done = subprocess.run(argv, env=child_env, capture_output=True, text=True, check=True)
                lines = done.stdout.strip().splitlines()
                if round_:
                    times[name].append(time.perf_counter() - started)
                    if len(lines) > 1:
                        for phase, ms in json.loads(lines[1]).items():
                            phases[name].setdefault(phase, []).append(ms)
                imported[name] = lines[0] if lines else ""
        print(f"fresh restore of a {args.window}-message window over {args.entries:,} entries, {args.rounds} rounds")
        for name, samples in times.items():
            line = f"{name:40s} median {statistics.median(samples) * 1000:7.1f} ms  min {min(samples) * 1000:7.1f} ms"
            print(f"{line}  {imported[name]}" if imported[name] else line)
            if phases[name]:
                print(" " * 4 + ", ".join(f"{p} {statistics.median(v):.1f} ms" for p, v in phases[name].items()))
        print(json.dumps({name: round(statistics.median(s) * 1000, 1) for name, s in times.items()}))


if __name__ == "__main__":
    main()
