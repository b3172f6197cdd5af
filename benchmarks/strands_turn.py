"""What a session manager adds to one Strands turn: ``LedgerSessionManager`` (SQLite) vs ``FileSessionManager``.

Three real ``strands.Agent`` objects driven by contextledger's ``ScriptedModel`` (no
network) take the same turns alternately in one process -- ``agent(prompt)``: one user
message, one model call, one assistant message:

* without a session manager (the baseline),
* with Strands' ``FileSessionManager`` (one JSON file per message plus the agent's JSON),
* with ``LedgerSessionManager`` on a SQLite file,
* with ``LedgerSessionManager`` on an in-memory ledger (the integration's own share:
  comparing the agent with the view, capturing the Strands state, building changesets).

All keep Strands' default conversation manager (a sliding window of 40 messages), so
from turn 21 on every turn also evicts. Each turn is timed; the overhead of a turn is
its time minus the baseline's time for the same turn. The script prints the medians and
95th percentiles of the overhead and their ratio (ledger / file), and the commits the
ledger made per turn (counted at the store).

    python benchmarks/strands_turn.py                  # 300 turns
    python benchmarks/strands_turn.py --turns 1000     # a longer conversation
    python benchmarks/strands_turn.py --quick          # 60 turns
    python benchmarks/strands_turn.py --write-results  # also rewrite its section of RESULTS.md
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _details import replace_section, versions

SECTION = "## Strands turn: LedgerSessionManager vs FileSessionManager (`benchmarks/strands_turn.py`)"


@dataclass
class Series:
    name: str
    seconds: list[float] = field(default_factory=list)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run(turns: int, directory: Path) -> tuple[dict[str, Series], list[int]]:
    from strands import Agent
    from strands.session.file_session_manager import FileSessionManager

    from contextledger.core.changeset import Changeset
    from contextledger.integrations.strands import LedgerSessionManager, ScriptedModel
    from contextledger.ledger import Ledger
    from contextledger.stores.memory import MemoryStore

    ledger = Ledger.connect(f"sqlite:///{directory / 'ledger.db'}")
    commits: list[Changeset] = []
    commit = ledger.store.commit

    def counting(changeset: Changeset) -> int:
        commits.append(changeset)
        return commit(changeset)

    ledger.store.commit = counting  # type: ignore[method-assign]

    def agent(session_manager: Any) -> Agent:
        return Agent(model=ScriptedModel(), callback_handler=None, session_manager=session_manager)

    agents: dict[str, Agent] = {
        "no session manager": agent(None),
        "FileSessionManager": agent(FileSessionManager("bench", storage_dir=str(directory / "files"))),
        "LedgerSessionManager (SQLite)": agent(LedgerSessionManager("bench", ledger=ledger)),
        "LedgerSessionManager (memory)": agent(LedgerSessionManager("bench", ledger=Ledger(MemoryStore()))),
    }
    series = {name: Series(name) for name in agents}
    per_turn_commits: list[int] = []
    gc.disable()
    try:
        for turn in range(turns):
            for name, a in agents.items():
                a.model.extend([f"answer {turn}: " + "lorem ipsum " * 8])  # type: ignore[attr-defined]
                before = len(commits)
                started = time.perf_counter()
                a(f"question {turn}: what about item {turn}?")
                series[name].seconds.append(time.perf_counter() - started)
                if name == "LedgerSessionManager (SQLite)":
                    per_turn_commits.append(len(commits) - before)
            if turn % 50 == 49:
                gc.collect()
    finally:
        gc.enable()
        ledger.close()
    return series, per_turn_commits


def report(series: dict[str, Series], commits: list[int], turns: int) -> list[str]:
    baseline = series["no session manager"].seconds
    lines = [
        f"Three real `strands.Agent`s driven by `ScriptedModel` take {turns} turns alternately in one process "
        "(no session manager, Strands' `FileSessionManager`, `LedgerSessionManager` on a SQLite file and on an "
        "in-memory ledger, the integration's own share), each with "
        "Strands' default sliding window of 40 messages, so from turn 21 on every turn also evicts. Overhead of a "
        "turn = its time minus the baseline's time for the same turn.",
        "",
        "| agent | turn median ms | overhead median ms | overhead p95 ms | overhead vs FileSessionManager |",
        "|---|---|---|---|---|",
    ]
    overheads: dict[str, list[float]] = {}
    for name, s in series.items():
        overheads[name] = [t - b for t, b in zip(s.seconds, baseline, strict=True)]
    file_median = statistics.median(overheads["FileSessionManager"])
    for name, s in series.items():
        o = overheads[name]
        ratio = "-" if name == "no session manager" else f"{statistics.median(o) / file_median:.2f}"
        lines.append(
            f"| {name} | {statistics.median(s.seconds) * 1e3:.3f} | {statistics.median(o) * 1e3:.3f} "
            f"| {_p95(o) * 1e3:.3f} | {ratio} |"
        )
    counts = sorted(set(commits))
    lines += [
        "",
        f"Ledger commits per turn: {', '.join(f'{c} ({commits.count(c)} turns)' for c in counts)}"
        " (the prompt; then the answer with the model-call count, the Strands state and the eviction).",
        "",
        versions(),
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="60 turns (what scripts/bench --quick runs)")
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns = min(args.turns, 60)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as scratch:
        series, commits = run(args.turns, Path(scratch))
    lines = report(series, commits, args.turns)
    print("\n".join([SECTION, "", *lines]))
    if args.write_results:
        replace_section(SECTION, lines)


_: Callable[..., Any] = main

if __name__ == "__main__":
    main()
