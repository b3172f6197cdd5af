"""Turning ledger records into rich tables and JSON documents.

JSON output keeps messages in the ledger's storage codec (:meth:`Message.to_record`),
so binary content survives a dump and can be read back with ``Message.from_record``.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from contextledger.messages import Message, encode_blocks
from contextledger.records import HistoryEntry, Revision, SummaryEntry, ViewEntry
from contextledger.text import describe, fmt_time, short

__all__ = [
    "Grid",
    "column_widths",
    "console",
    "describe",
    "dump_json",
    "fit_columns",
    "fmt_time",
    "history_row_json",
    "json_line",
    "record_json",
    "short",
    "table",
    "view_entry_json",
]

PIPE_WIDTH = 120


def console() -> Console:
    """A console on the current stdout (resolved per call so redirection is honoured).

    A terminal's own width is used; output to a pipe or file is laid out 120 columns
    wide unless ``COLUMNS`` says otherwise.
    """
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(file=sys.stdout, highlight=False, width=width)


def record_json(record: BaseModel) -> dict[str, Any]:
    """A JSON-safe dict of a record; messages and block lists keep their bytes losslessly."""
    message = getattr(record, "message", None)
    exclude = {"message"} if isinstance(message, Message) else set()
    if isinstance(record, Revision):
        exclude.add("original")
    data: dict[str, Any] = record.model_dump(mode="json", exclude=exclude)
    if isinstance(message, Message):
        data["message"] = message.to_record()
    if isinstance(record, Revision):
        data["original"] = encode_blocks(record.original)
    return data


def view_entry_json(entry: ViewEntry) -> dict[str, Any]:
    """One entry of the live view as JSON (``pinned`` made explicit)."""
    data = record_json(entry)
    data["pinned"] = entry.pinned
    return data


def history_row_json(row: HistoryEntry | SummaryEntry) -> dict[str, Any]:
    """A history row as JSON with its ``kind`` (``message`` or ``summary``)."""
    data = record_json(row)
    data["kind"] = "message" if isinstance(row, HistoryEntry) else "summary"
    return data


def dump_json(document: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def json_line(document: Mapping[str, Any]) -> str:
    """One compact JSON line (for JSON-lines exports)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


WRAPPING_COLUMNS = frozenset(
    {"content", "scenario", "manager", "reductions", "why", "agents", "status", "repair", "session", "original"}
)
"""Columns whose text may wrap; every other column keeps its values on one line."""

CONTENT_COLUMNS = frozenset({"content", "why", "original", "session"})
"""The free-text column of a listing: it keeps at least :data:`CONTENT_MIN` characters."""
CONTENT_MIN = 30
WRAP_MIN = 10
"""Narrowest a wrapping column other than the content column gets."""


def _natural(name: str, cells: Sequence[Text]) -> int:
    return max([len(name), *(cell.cell_len for cell in cells)])


def fit_columns(columns: Sequence[str], rows: Sequence[Sequence[Text]], width: int, drop: Sequence[str]) -> list[str]:
    """The columns that fit ``width``: the names in ``drop`` give way first, in that order.

    A one-line column needs its widest value; a wrapping column needs :data:`WRAP_MIN`
    (the content column :data:`CONTENT_MIN`), or less when its values are shorter. Each
    column adds three characters of padding and border, plus one for the table's edge.
    """
    keep = list(columns)

    def need(names: Sequence[str]) -> int:
        total = 1
        for name in names:
            i = columns.index(name)
            natural = _natural(name, [row[i] for row in rows])
            if name in CONTENT_COLUMNS:
                natural = min(natural, CONTENT_MIN)
            elif name in WRAPPING_COLUMNS:
                natural = min(natural, WRAP_MIN)
            total += natural + 3
        return total

    for name in drop:
        if need(keep) <= width:
            break
        if name in keep:
            keep.remove(name)
    # Still too wide (a narrow terminal): the one-line columns give way from the right,
    # the first (the row's key) and the content column last of all.
    for name in [c for c in reversed(keep[1:]) if c not in CONTENT_COLUMNS]:
        if need(keep) <= width:
            break
        keep.remove(name)
    return keep


def column_widths(columns: Sequence[str], rows: Sequence[Sequence[Text]], width: int) -> dict[str, int] | None:
    """Widths that make ``columns`` fit ``width`` exactly as intended, or ``None`` when they cannot.

    One-line columns get their widest value; the content column gets up to its widest
    value, never less than :data:`CONTENT_MIN` (or its widest value when shorter); other
    wrapping columns get what they need from the rest first, never less than :data:`WRAP_MIN`.
    """
    natural = {name: _natural(name, [row[i] for row in rows]) for i, name in enumerate(columns)}
    widths = {name: natural[name] for name in columns if name not in WRAPPING_COLUMNS}
    wrapping = [name for name in columns if name in WRAPPING_COLUMNS and name not in CONTENT_COLUMNS]
    content = [name for name in columns if name in CONTENT_COLUMNS]
    for name in wrapping:
        widths[name] = min(natural[name], WRAP_MIN)
    for name in content:
        widths[name] = min(natural[name], CONTENT_MIN)
    room = width - 1 - 3 * len(columns) - sum(widths.values())
    if room < 0:
        return None
    # Short free text (a status, a list of agents) gets its width first, then the content
    # column everything left: it already has its 30.
    for name in wrapping + content:
        extra = min(room, natural[name] - widths[name])
        widths[name] += extra
        room -= extra
    return widths


class Grid:
    """A table laid out once, in plain Python, and printed as ready-made lines.

    Rich's own table measures and wraps every cell through its renderables, which costs
    milliseconds a row; a 2,000-row history must print in well under a second. The
    columns (see :func:`fit_columns` and :func:`column_widths`) are known up front, so each
    cell is wrapped with :mod:`textwrap` and each line drawn with the box characters of
    rich's default table. Styles of whole cells (``dim`` rows, a bold header) are kept.
    """

    def __init__(
        self, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Text]], widths: Sequence[int]
    ):
        """Lay out ``rows`` under ``columns`` at ``widths`` (one per column)."""
        self.title = title
        self.columns = list(columns)
        self.rows = rows
        self.widths = list(widths)

    def _cell_lines(self, name: str, text: str, width: int) -> list[str]:
        if name not in WRAPPING_COLUMNS:
            return [text if cell_len(text) <= width else set_cell_size(text, width - 1) + "…"]
        lines: list[str] = []
        for paragraph in text.splitlines() or [""]:
            wrapped = textwrap.wrap(paragraph, width, break_on_hyphens=False, drop_whitespace=True) or [""]
            for line in wrapped:
                while cell_len(line) > width:  # wide characters: fold by cells
                    head = set_cell_size(line, width)
                    lines.append(head)
                    line = line[len(head) :]
                lines.append(line)
        return lines

    def _edge(self, left: str, fill: str, cross: str, right: str) -> Segment:
        return Segment(left + cross.join(fill * (w + 2) for w in self.widths) + right)

    def _row(self, cells: Sequence[str], bar: str) -> str:
        inner = f" {bar} ".join(
            cell + " " * (width - cell_len(cell)) for cell, width in zip(cells, self.widths, strict=True)
        )
        return f"{bar} {inner} {bar}"

    def __rich_console__(self, console: Console, options: Any) -> Iterator[Segment]:
        """Yield the table's lines, one segment each (a row's style is its first cell's)."""
        newline = Segment.line()
        if self.title:
            yield Segment(self.title, Style(italic=True))
            yield newline
        yield self._edge("┏", "━", "┳", "┓")
        yield newline
        yield Segment(self._row(self.columns, "┃"), Style(bold=True))
        yield newline
        yield self._edge("┡", "━", "╇", "┩")
        yield newline
        styles: dict[str, Style] = {}
        for row in self.rows:
            style = str(row[0].style) if row and row[0].style else ""
            if style and style not in styles:
                styles[style] = Style.parse(style)
            wrapped = [
                self._cell_lines(name, cell.plain, width)
                for name, cell, width in zip(self.columns, row, self.widths, strict=True)
            ]
            for i in range(max(len(w) for w in wrapped)):
                yield Segment(self._row([w[i] if i < len(w) else "" for w in wrapped], "│"), styles.get(style))
                yield newline
        yield self._edge("└", "─", "┴", "┘")
        yield newline


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[str | Text]],
    *,
    drop: Sequence[str] = (),
    width: int | None = None,
) -> Grid:
    """A table laid out for the terminal's width; ids, numbers and names never wrap, only free text does.

    When the columns do not fit ``width`` (default: the console's), the columns named in
    ``drop`` are left out, in that order, until they do; the content column keeps at
    least :data:`CONTENT_MIN` characters and no column is squeezed to nothing.
    """
    # Ledger content is data, never rich markup: "[turn 3]" must print as is.
    cells = [[Text(cell) if isinstance(cell, str) else cell for cell in row] for row in rows]
    width = width or console().width
    keep = fit_columns(columns, cells, width, drop)
    index = [columns.index(name) for name in keep]
    kept = [[row[i] for i in index] for row in cells]
    widths = column_widths(keep, kept, width)
    if widths is None:  # narrower than any layout: every column at its floor, the line overflows
        widths = {name: min(_natural(name, [r[i] for r in kept]), WRAP_MIN) for i, name in enumerate(keep)}
    return Grid(title, keep, kept, [widths[name] for name in keep])
