"""Long listings through a pager on a terminal (like ``git log``), never when piped; ``--limit`` / ``--last``.

The pager is ``$CONTEXTLEDGER_PAGER``, else ``$PAGER``, else ``less -FRX`` (quits at
once when the text fits one screen, keeps colours); an empty value or ``--no-pager``
turns paging off. Output to a pipe or a file is never paged.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console

from contextledger.cli.errors import ExitCode
from contextledger.cli.options import LastOption, LimitOption, NoPagerOption
from contextledger.cli.render import Cell, console, table

__all__ = [
    "LastOption",
    "LimitOption",
    "NoPagerOption",
    "paged",
    "pager_command",
    "print_table",
    "progress_bar",
    "window",
    "write_file",
]

T = TypeVar("T")


def window(rows: Sequence[T], limit: int | None, last: int | None) -> list[T]:
    """The rows ``--limit`` / ``--last`` select (both: the last N of the first M).

    Raises:
        typer.BadParameter: A count is below 1 (typer checks this for the options too).
    """
    for name, value in (("--limit", limit), ("--last", last)):
        if value is not None and value < 1:
            raise typer.BadParameter(f"{name} must be at least 1", param_hint=name)
    selected = list(rows)
    if limit is not None:
        selected = selected[:limit]
    if last is not None:
        selected = selected[-last:]
    return selected


def counted(limit: int | None, last: int | None) -> dict[str, int | None]:
    """The page to read per agent for ``--limit`` / ``--last`` (both: the first ``limit``; none: everything).

    A listing's first (last) N rows across agents are among each agent's first (last) N,
    so a command reads at most N rows per agent and :func:`window` cuts the merged rows.
    """
    return {"limit": limit, "last": None if limit is not None else last}


def pager_command() -> list[str] | None:
    """The pager to run, or ``None`` when paging is turned off."""
    for name in ("CONTEXTLEDGER_PAGER", "PAGER"):
        if name in os.environ:
            value = os.environ[name].strip()
            return shlex.split(value) if value and value != "cat" else None
    less = shutil.which("less")
    return [less, "-FRX"] if less else None


@contextmanager
def paged(*, enabled: bool = True) -> Iterator[Console]:
    """A console whose output goes through the pager when stdout is a terminal and it is taller than one.

    On a pipe (or with ``enabled`` false) the console writes straight to stdout.
    """
    out = console()
    command = pager_command() if enabled and sys.stdout.isatty() else None
    if command is None:
        yield out
        return
    with out.capture() as captured:
        yield out
    text = captured.get()
    if text.count("\n") < out.height - 1:
        sys.stdout.write(text)
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, env=env)
    except OSError:  # no such pager: print instead of failing the command
        sys.stdout.write(text)
        return
    try:
        assert process.stdin is not None
        process.stdin.write(text.encode("utf-8", errors="replace"))
        process.stdin.close()
    except BrokenPipeError:  # the reader quit early (q in less)
        pass
    process.wait()


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    drop: Sequence[str] = (),
    empty: str | None = None,
    no_pager: bool = False,
    styles: Sequence[str] = (),
) -> None:
    """Print one listing (see :func:`~contextledger.cli.render.table`), paged on a terminal; ``empty`` when no rows."""
    with paged(enabled=not no_pager) as out:
        out.print(table(title, columns, rows, drop=drop, styles=styles))
        if empty is not None and not rows:
            out.print(empty)


@contextmanager
def progress_bar(name: str, doing: str, unit: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (``DOING ━━━━ 3/10 UNIT 0:00:02``) for ``total`` units; yields ``advance(n)``.

    ``name`` names the bar's task (not shown). The bar stays on screen when done.
    """
    # rich.progress only for the commands that write (the listings never draw a bar).
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn(doing), BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=False) as bar:
        task = bar.add_task(name, total=total)
        yield lambda n: bar.advance(task, n)


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8); a file that cannot be written is one line on stderr and exit 1."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(f"error: cannot write {path}: {exc.strerror or exc}", err=True)
        raise typer.Exit(ExitCode.ERROR) from None
