"""A turn under a per-turn sliding window, against another source tree: where a managed agent spends its commits.

Each round starts one child process per source tree (this checkout's ``src``, and with
``--against`` another checkout's, put first on ``PYTHONPATH``), alternately. A child
takes ``--turns`` turns of four prebuilt messages (``contenders.cl.native_turn``: user
text, toolUse, toolResult, answer) in three lanes, stepped alternately in its process:

* ``turn (memory)`` / ``turn (SQLite)`` -- ``append`` of the turn, then
  ``before_model_call()``, on a conversation managed by
  ``SlidingWindowConversationManager(window_size=40, per_turn=True)``: past the window,
  each call evicts the oldest turn (a reduction commit), as a managed agent's turn does;
* ``evict a turn (SQLite)`` -- ``apply_plan`` of a plan evicting the four oldest
  entries of a 40-message window, after an untimed append (the reduction alone).

The first ``--warmup`` turns are left out (the window fills up). Printed: per tree, the
median over rounds of each child's median client CPU (``thread_time``) per step, and
with ``--against`` the ratio other/this (above 1: this tree is faster), with the load
average before and after.

    python benchmarks/window_turn.py                       # this tree, 5 rounds of 600 turns
    python benchmarks/window_turn.py --against ../old/src  # side by side with another tree
    python benchmarks/window_turn.py --json                # one JSON line of the figures too
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
LANES = ("turn (memory)", "turn (SQLite)", "evict a turn (SQLite)")

CHILD = """
import json, statistics, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from contenders.cl import native_turn
from contextledger import Ledger, ReductionPlan, SlidingWindowConversationManager

turns, warmup = int(sys.argv[2]), int(sys.argv[3])
directory = tempfile.mkdtemp()
def window():
    return SlidingWindowConversationManager(window_size=40, per_turn=True)

managed = [
    Ledger.connect(url).conversation("w", "agent", manager=window())
    for url in ("memory://", f"sqlite:///{directory}/managed.db")
]
plain = Ledger.connect(f"sqlite:///{directory}/plain.db").conversation("p", "agent")

def oldest_turn(view):
    return ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:4]))

times = [[], [], []]
for n in range(turns + warmup):
    for lane, conversation in enumerate(managed):
        messages = native_turn(conversation.session_id, n)
        t0 = time.thread_time()
        conversation.append(*messages)
        conversation.before_model_call()
        if n >= warmup:
            times[lane].append(time.thread_time() - t0)
    plain.append(*native_turn("p", n))
    if len(plain.view) > 40:
        t0 = time.thread_time()
        plain.apply_plan(oldest_turn, trigger="per_turn")
        if n >= warmup:
            times[2].append(time.thread_time() - t0)
print(json.dumps([statistics.median(t) * 1e6 for t in times]))
"""


def _child(src: Path, turns: int, warmup: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(HERE), str(turns), str(warmup)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the child on {src} failed:\n{done.stderr[-3000:]}")
    figures: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600, help="timed turns per child")
    parser.add_argument("--warmup", type=int, default=20, help="turns left out first (the window fills)")
    parser.add_argument("--rounds", type=int, default=5, help="children per tree, alternating")
    parser.add_argument("--against", type=Path, default=None, help="another checkout's src directory")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()
    for name in ("turns", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 10:
        parser.error(f"--warmup must be at least 10 (the window fills after ten turns), got {args.warmup}")
    trees = {"this tree": SRC}
    if args.against is not None:
        if not (args.against / "contextledger").is_dir():
            parser.error(f"--against {args.against} holds no contextledger package")
        trees["other tree"] = args.against.resolve()
    before = os.getloadavg()[0]
    runs: dict[str, list[list[float]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees.items()) if r % 2 == 0 else list(reversed(trees.items()))
        for name, src in order:
            runs[name].append(_child(src, args.turns, args.warmup))
    after = os.getloadavg()[0]
    medians = {
        name: [statistics.median(run[i] for run in rounds) for i in range(len(LANES))] for name, rounds in runs.items()
    }
    print(
        f"Client CPU per step, us: medians of {args.rounds} children of {args.turns} turns each per tree, alternating"
        f" (load average {before:.2f} before, {after:.2f} after (1 min), {os.cpu_count()} CPUs)."
    )
    header = "| lane | this tree |" + (" other tree | other / this |" if args.against else "")
    print(header)
    print("|---|---:|" + ("---:|---:|" if args.against else ""))
    for i, lane in enumerate(LANES):
        row = f"| {lane} | {medians['this tree'][i]:.0f} |"
        if args.against:
            other = medians["other tree"][i]
            row += f" {other:.0f} | {other / medians['this tree'][i]:.2f}x |"
        print(row)
    if args.json:
        print(json.dumps({"lanes": list(LANES), **medians, "rounds": args.rounds, "turns": args.turns}))


if __name__ == "__main__":
    main()
