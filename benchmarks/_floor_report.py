"""The report's part for ``floor.py`` and ``driver_calls.py``: an append against its own statements replayed.

``run.py``'s ``floor`` workload runs both scripts with ``--json`` on the run's servers
and keeps their figures whole; the targets table takes from them the append within 1.5x
of its own statements replayed on the bare driver (each engine), with the writer of
the same rows by hand beside it (SQLite), and RESULTS.md shows both scripts' tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from _cells import contender_label, per_clock, times
from _run import Run

__all__ = ["floor_tables", "floor_targets"]


def floor_targets(
    run: Run,
    figures: dict[str, list[dict[str, Any]]],
    verdict: Callable[[bool | None], str],
) -> list[tuple[str, str, str]]:
    """Each engine's append within 1.5x of its statements replayed (``floor.py``), and the writer by hand beside it."""
    out: list[tuple[str, str, str]] = []
    for f in figures.get("floor.py", []):
        cpu, wall = f["vs_replayed"]["cpu_us"], f["vs_replayed"]["wall_us"]
        out.append(
            (
                f"append, {contender_label(run, 'cl-' + f['engine'])}: within 1.5x of its own statements replayed on "
                "the bare driver (floor.py, warm)",
                f"wall {times(wall)}, client CPU {times(cpu)} "
                f"({f['ledger']['cpu_us']:,.0f} vs {f['replayed']['cpu_us']:,.0f} us)",
                per_clock(verdict, wall, cpu, lambda ratio: ratio <= 1.5),
            )
        )
    for f in figures.get("driver_calls.py", []):
        whole = f["whole"]
        out.append(
            (
                "a plain Python writer of the same rows (SQLite, driver_calls.py): each step against the same "
                "calls replayed back to back, the lanes taking turns",
                f"{times(whole['rows built by hand'] / whole['replayed'])} "
                f"(the ledger's append {times(whole['ledger'] / whole['replayed'])})",
                "-",
            )
        )
    return out


def floor_tables(figures: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The tables ``floor.py`` and ``driver_calls.py`` print, from their figures (as their own runs write them)."""
    from driver_calls import table as calls_table
    from floor import table as floor_table

    def load(found: list[dict[str, Any]]) -> str:
        before, after = found[0]["load_before"], found[-1]["load_after"]
        return f"load average {before:.2f} before, {after:.2f} after (1 min), {os.cpu_count()} CPUs"

    lines: list[str] = []
    engines = figures.get("floor.py", [])
    if engines:
        lines += floor_table(engines, engines[0]["turns"], load(engines))
    for calls in figures.get("driver_calls.py", []):
        lines += ["", *calls_table(calls, load([calls]))]
    return lines
