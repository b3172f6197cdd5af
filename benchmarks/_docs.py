"""The figures the README and docs/performance.md state, rewritten by the run that measured them.

A page holds its measured figures only between the markers ``<!-- bench:targets -->`` and
``<!-- /bench:targets -->``; a full run (``scripts/bench`` writing into ``benchmarks/``)
replaces what is between them with its own targets table, so no figure on those pages
outlives the run it came from. ``tests/test_bench_docs.py`` checks that no figure
claiming a measurement stands outside the markers.
"""

from __future__ import annotations

import re
from pathlib import Path

from _report import targets
from _run import Run, machine

__all__ = ["BEGIN", "END", "PAGES", "block", "rewrite"]

BEGIN = "<!-- bench:targets -->"
END = "<!-- /bench:targets -->"
PAGES = ("README.md", "docs/performance.md")
"""The pages whose performance statements the run owns (relative to the checkout)."""


def block(run: Run) -> str:
    """The generated text: how the figures were measured, then the targets table."""
    m = machine()
    version = run.versions.get("contextledger", "?")
    lines = [
        f"Measured by `scripts/bench` (contextledger {version}) on {m['cpu']}, {m['cores']} cores, "
        f"load average {run.load[0]:.1f} at the start and {run.load[1]:.1f} at the end; wall time and the "
        "client's CPU time of the same repetitions (a server's CPU is not counted), each setting named "
        "next to its figure. Every table, the durability of every contender and the reasons for each n/a "
        "are in [Benchmark results](benchmarks/results.md).",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        *(f"| {t} | {v} | {ok} |" for t, v, ok in targets(run)),
    ]
    return "\n".join(lines)


def rewrite(run: Run, root: Path) -> list[Path]:
    """Replace the generated block of every page in :data:`PAGES` that has one; return those changed."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    text = f"{BEGIN}\n{block(run)}\n{END}"
    changed = []
    for name in PAGES:
        path = root / name
        if not path.exists():
            continue
        old = path.read_text()
        new = pattern.sub(lambda _: text, old)
        if new != old:
            path.write_text(new)
            changed.append(path)
    return changed
