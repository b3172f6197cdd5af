"""What the detail scripts print and write: their load line, their figures, their section of ``DETAILS.md``.

* :func:`publish` prints a script's figures as one JSON line or as its Markdown table,
  and with a title rewrites that table's section of ``DETAILS.md``;
* :func:`load_text` is the load line of a table: the load average before and after the
  run, and the CPUs;
* :func:`replace_section` rewrites one benchmark's section of ``DETAILS.md``, keeping
  the others;
* :func:`versions` is the line under each section: the interpreter, SQLite, the
  drivers, the machine.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("DETAILS.md")


def versions(extra: Sequence[str] = ()) -> str:
    """The machine/software line of DETAILS.md."""
    import importlib.metadata as md

    parts = [f"Python {platform.python_version()}", f"SQLite {sqlite3.sqlite_version}", *extra]
    for package in ("sqlalchemy", "psycopg", "redis", "strands-agents"):
        with suppress(md.PackageNotFoundError):
            parts.append(f"{package} {md.version(package)}")
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    return f"Measured with {', '.join(parts)} on {machine}."


def replace_section(title: str, lines: Sequence[str]) -> None:
    """Replace the section headed ``title`` in DETAILS.md (append it when missing), keeping the others."""
    current = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    body = "\n".join([title, "", *lines]).rstrip("\n") + "\n"
    if title in current:
        before, _, rest = current.partition(title)
        following = rest.find("\n## ")
        after = rest[following + 1 :] if following >= 0 else ""
    else:
        before, after = current.rstrip("\n") + "\n\n", ""
    RESULTS.write_text(before + body + ("\n" + after if after else ""))
    print(f"wrote {RESULTS.name}: {title.removeprefix('## ')}")


def load_text(before: Sequence[float], after: Sequence[float]) -> str:
    """A detail script's load line: the 1-minute load average before and after its run, and the CPUs."""
    return f"load average {before[0]:.2f} before, {after[0]:.2f} after (1 min), {os.cpu_count()} CPUs"


def publish(
    figures: dict[str, Any],
    before: Sequence[float],
    after: Sequence[float],
    table: Callable[[dict[str, Any], str], list[str]],
    *,
    as_json: bool,
    title: str | None,
) -> None:
    """Print a detail script's figures: one JSON line with the load around the run, or its Markdown table.

    ``table`` makes the table from the figures and the load line; with ``title`` the table
    (and the versions line) also replaces that section of DETAILS.md. Nothing is written
    with ``as_json``.
    """
    if as_json:
        print(json.dumps({**figures, "load_before": before[0], "load_after": after[0]}))
        return
    lines = table(figures, load_text(before, after))
    print("\n".join(lines))
    if title is not None:
        replace_section(title, [*lines, "", versions()])
