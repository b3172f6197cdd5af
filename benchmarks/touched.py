"""What a cold SQLite append touches: instructions and last-level cache misses, ledger vs plain, under cachegrind.

A step of ``scripts/bench`` starts with cold caches, and a cold step's time follows the
cache lines it has to bring in. This runs each contender in a child process under
Valgrind's cachegrind, whose caches are simulated (``--l1-kb`` for each first-level
cache, ``--ll-mb`` for the last level), twice: once appending ``--appends`` turns of
four messages, the caches evicted and the turn's input built before each (as
``floor.py --cold`` does), and once evicting and building alone. The difference of the
two runs is what the appends did. Per append, for each contender:

* ``ledger`` -- ``Conversation.append(*messages)`` on a new SQLite ledger;
* ``plain`` -- the bare driver on one table with one index (``contenders/raw.py``);

it prints the instructions executed and the lines the last-level cache missed
(instruction fetches, data reads, data writes), the ratios ledger / plain, and the
functions taking the most of the ledger's data-read misses (of the interpreter, the
libraries and SQLite: Python functions are not told apart there).

    python benchmarks/touched.py                   # 30 appends per run
    python benchmarks/touched.py --appends 60 --ll-mb 32

The cyclic collector is paused while the turns are measured (see :func:`child`).
Needs ``valgrind`` on the PATH (Debian's package). No timing: the figures are counts of
a simulated machine, the same on any host for the same sizes and caches.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

LANES = ("ledger", "plain")
WARM_TURNS = 20  # appended before the measured ones, in both runs of a lane
EVICT_MB = 64  # the buffer written before each turn: above the simulated last level


class Counts(NamedTuple):
    """What cachegrind counted, for a whole run or one function."""

    instructions: int
    fetch_misses: int  # ILmr: instruction lines the last level missed
    read_misses: int  # DLmr
    write_misses: int  # DLmw

    @property
    def misses(self) -> int:
        """Every line the last level missed."""
        return self.fetch_misses + self.read_misses + self.write_misses

    def columns(self) -> tuple[int, int, int, int, int]:
        """The report's columns: instructions, then last-level misses in all, of fetches, of reads, of writes."""
        return (self.instructions, self.misses, self.fetch_misses, self.read_misses, self.write_misses)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(*(a - b for a, b in zip(self, other, strict=True)))


_EVENTS = ("Ir", "ILmr", "DLmr", "DLmw")


def parse(text: str) -> tuple[Counts, dict[str, Counts]]:
    """A cachegrind output file's totals and its counts by function (``file:function``).

    Raises:
        ValueError: The text has no ``events:`` line naming the four events read here.
    """
    events: list[str] = []
    by_function: dict[str, list[int]] = {}
    file = function = ""
    summary: list[int] | None = None
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("fl="):
            file = line[3:]
        elif line.startswith("fn="):
            function = line[3:]
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split()[1:]]
        elif line[:1].isdigit() and events:
            values = [int(v) for v in line.split()[1:]]
            counts = by_function.setdefault(f"{file}:{function}", [0] * len(events))
            for i, value in enumerate(values):
                counts[i] += value
    missing = [e for e in _EVENTS if e not in events]
    if missing:
        raise ValueError(f"not a cachegrind output with cache simulation (no {', '.join(missing)} counted)")
    index = [events.index(e) for e in _EVENTS]

    def pick(values: list[int]) -> Counts:
        values = values + [0] * (len(events) - len(values))
        return Counts(*(values[i] for i in index))

    functions = {name: pick(values) for name, values in by_function.items()}
    total = pick(summary) if summary is not None else Counts(*(sum(c) for c in zip(*functions.values(), strict=True)))
    return total, functions


def child(lane: str, appends: int, append: bool) -> NoReturn:
    """The run measured: ``appends`` turns built after an eviction each, appended when ``append``.

    The cyclic collector is paused for the measured turns, in both runs of both lanes: a
    collection of the old generations walks the whole heap (the libraries' objects with
    it), which a run this short would count in full on one append or on none.
    """
    from _evict import CacheEvictor

    evict = CacheEvictor(EVICT_MB)
    directory = tempfile.mkdtemp()
    build, write = _contender(lane, directory)
    for n in range(WARM_TURNS):
        write(build(n))
    gc.collect()
    gc.disable()
    for n in range(WARM_TURNS, WARM_TURNS + appends):
        evict()
        made = build(n)
        if append:
            write(made)
    shutil.rmtree(directory, ignore_errors=True)
    # No interpreter teardown: closing the databases there (a WAL checkpoint on the last
    # connection) and finalizing what each run left would be counted unevenly in the two runs.
    sys.stdout.flush()
    os._exit(0)


def _contender(lane: str, directory: str) -> tuple[Callable[[int], Any], Callable[[Any], object]]:
    """How ``lane`` builds turn ``n``'s input, and how it appends it, on a new database in ``directory``."""
    from _protocol import turn
    from contenders.cl import native_turn
    from contenders.raw import RawSQLite
    from contextledger import Ledger

    if lane == "ledger":
        conversation = Ledger.connect(f"sqlite:///{directory}/ledger.db").conversation("touched", "agent")
        return partial(native_turn, "touched"), lambda messages: conversation.append(*messages)
    plain = RawSQLite()
    plain.setup("append", {"path": f"{directory}/plain.db", "session": "touched"})
    return partial(turn, "touched"), plain.write


def run(lane: str, appends: int, append: bool, l1_kb: int, ll_mb: int, out: Path) -> tuple[Counts, dict[str, Counts]]:
    """One child under cachegrind; what it counted.

    Raises:
        RuntimeError: The child failed (its error output is in the message).
    """
    l1 = f"{l1_kb << 10},8,64"
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=yes",
        f"--I1={l1}",
        f"--D1={l1}",
        f"--LL={ll_mb << 20},16,64",
        f"--cachegrind-out-file={out}",
        sys.executable,
        __file__,
        "--child",
        lane,
        "--appends",
        str(appends),
        # The two runs differ in one character: the same memory layout up to the measured turns (the
        # interpreter's attribute cache is keyed by addresses, so a shifted layout moves its misses).
        "--append",
        "1" if append else "0",
    ]
    # One string hash for every run: the runs differ by the appends alone, not by how each laid out its dicts.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{lane} failed under cachegrind:\n{done.stderr[-3000:]}")
    return parse(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--appends", type=int, default=30, help="turns appended (and measured) per run")
    parser.add_argument("--l1-kb", type=int, default=32, help="each simulated first-level cache (KB)")
    parser.add_argument("--ll-mb", type=int, default=32, help="the simulated last-level cache (MB)")
    parser.add_argument("--top", type=int, default=8, help="functions listed for the ledger's data-read misses")
    parser.add_argument("--child", choices=LANES, help=argparse.SUPPRESS)
    parser.add_argument("--append", choices=("0", "1"), default="1", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.appends, args.append == "1")
    if args.appends <= 0:
        parser.error(f"--appends must be positive, got {args.appends}")
    if not 0 < args.ll_mb < EVICT_MB:
        parser.error(f"--ll-mb must be positive and below the {EVICT_MB} MB written to evict it, got {args.ll_mb}")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    per_append: dict[str, Counts] = {}
    functions: dict[str, Counts] = {}
    reads = 0
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        # Four independent children (each lane with and without its appends), as many at once as there are cores.
        runs = {
            (lane, append): pool.submit(
                run, lane, args.appends, append, args.l1_kb, args.ll_mb, Path(scratch, f"{lane}-{append}.out")
            )
            for lane in LANES
            for append in (True, False)
        }
        for lane in LANES:
            (total, by_function), (base, base_functions) = runs[lane, True].result(), runs[lane, False].result()
            per_append[lane] = Counts(*(v // args.appends for v in total - base))
            if lane == "ledger":
                reads = (total - base).read_misses  # the shares' whole: every function's, netted
                zero = Counts(0, 0, 0, 0)
                functions = {name: counts - base_functions.get(name, zero) for name, counts in by_function.items()}
    ledger, plain = per_append["ledger"], per_append["plain"]
    print(
        f"One SQLite append of four messages, the caches evicted before each: counts per append over "
        f"{args.appends} appends per run (simulated caches: L1 {args.l1_kb} KB, last level {args.ll_mb} MB)."
    )
    print()
    print("| contender | instructions | LL misses | instruction fetches | data reads | data writes |")
    print("|---|---:|---:|---:|---:|---:|")
    for lane, c in per_append.items():
        print(f"| {lane} | " + " | ".join(f"{v:,}" for v in c.columns()) + " |")
    pairs = zip(ledger.columns(), plain.columns(), strict=True)
    # A count the appends did not raise (possible over very few of them) has no ratio.
    print("| ledger / plain | " + " | ".join(f"{a / b:.2f}x" if b > 0 else "-" for a, b in pairs) + " |")
    print()
    print("The ledger's data-read misses by function (share of all):")
    top = Counter({name: c.read_misses for name, c in functions.items()}).most_common(args.top)
    for name, count in top:
        print(f"  {count / reads if reads else 0:6.1%}  {name.rsplit('/', 1)[-1]}")


if __name__ == "__main__":
    main()
