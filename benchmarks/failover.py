"""Redis Cluster failover trials: what each durability setting loses when a primary is SIGKILLed.

    scripts/bench --failover                 # 3 trials per (durability, lag)
    python benchmarks/failover.py --trials 1 --lags 0

Each trial starts a 3+3 cluster, runs 4 writers on conversations of one primary, kills
that primary (after cutting its replica off for ``lag`` seconds, or not at all with 0),
restarts it as a replica once its replica is promoted, and counts the acknowledged appends
missing afterwards (``tests/scale/redis_trial.py``). Prints one JSON line per trial.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.scale.redis_trial import run_trial  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    """Run the trials and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--durabilities", default="primary,replicated")
    parser.add_argument("--lags", default="0,0.4", help="seconds the replica is cut off before the kill")
    args = parser.parse_args(argv)
    for lag in (float(x) for x in args.lags.split(",")):
        for durability in args.durabilities.split(","):
            for trial in range(args.trials):
                result = run_trial(durability, lag=lag)
                print(json.dumps({"trial": trial, **asdict(result), "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
