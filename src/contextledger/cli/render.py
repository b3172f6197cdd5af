"""Turning ledger records into rich tables and JSON documents.

JSON output keeps messages in the ledger's storage codec (:meth:`Message.to_record`),
so binary content survives a dump and can be read back with ``Message.from_record``.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from contextledger.history.transfer import json_line, record_json
from contextledger.model.records import HistoryEntry, SummaryEntry, ViewEntry
from contextledger.model.text import describe, fmt_time, short

__all__ = [
    "Cell",
    "Grid",
    "cells_of",
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
    "wrap",
]

PIPE_WIDTH = 120


def console() -> Console:
    """A console on the current stdout (resolved per call so redirection is honoured).

    A terminal's own width is used; output to a pipe or file is laid out 120 columns
    wide unless ``COLUMNS`` says otherwise.
    """
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(file=sys.stdout, highlight=False, width=width)


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


WRAPPING_COLUMNS = frozenset(
    {"content", "scenario", "manager", "reductions", "why", "agents", "status", "repair", "session", "original"}
)
"""Columns whose text may wrap; every other column keeps its values on one line."""

CONTENT_COLUMNS = frozenset({"content", "why", "original", "session"})
"""The free-text column of a listing: it keeps at least :data:`CONTENT_MIN` characters."""
CONTENT_MIN = 30
WRAP_MIN = 10
"""Narrowest a wrapping column other than the content column gets."""


Cell = str | Text
"""A table cell: plain text (never parsed as markup), or a :class:`~rich.text.Text` whose style colours its row."""

# The control characters rich's Text drops (bell, backspace, vertical tab, form feed, CR):
# ledger content is data and must not move the terminal's cursor.
_CONTROL = dict.fromkeys((7, 8, 11, 12, 13))


def cells_of(text: str) -> int:
    """Terminal cells ``text`` takes: its length for printable ASCII (the usual case), else rich's measure."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


def _plain(cell: Cell) -> str:
    text = cell if isinstance(cell, str) else cell.plain
    return text if text.isprintable() else text.translate(_CONTROL)


def _natural(name: str, cells: Iterable[Cell]) -> int:
    return max([len(name), *(cells_of(cell if isinstance(cell, str) else cell.plain) for cell in cells)])


def fit_columns(columns: Sequence[str], rows: Sequence[Sequence[Cell]], width: int, drop: Sequence[str]) -> list[str]:
    """The columns that fit ``width``: the names in ``drop`` give way first, in that order.

    A one-line column needs its widest value; a wrapping column needs :data:`WRAP_MIN`
    (the content column :data:`CONTENT_MIN`), or less when its values are shorter. Each
    column adds three characters of padding and border, plus one for the table's edge.
    """
    keep = list(columns)
    # Each column's widest value is measured once, however many layouts are tried.
    natural = {name: _natural(name, [row[i] for row in rows]) for i, name in enumerate(columns)}

    def need(names: Sequence[str]) -> int:
        total = 1
        for name in names:
            wanted = natural[name]
            if name in CONTENT_COLUMNS:
                wanted = min(wanted, CONTENT_MIN)
            elif name in WRAPPING_COLUMNS:
                wanted = min(wanted, WRAP_MIN)
            total += wanted + 3
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


def column_widths(
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    width: int,
    *,
    wrapping: frozenset[str] | set[str] = WRAPPING_COLUMNS,
) -> dict[str, int] | None:
    """Widths that make ``columns`` fit ``width`` exactly as intended, or ``None`` when they cannot.

    One-line columns get their widest value; the content column gets up to its widest
    value, never less than :data:`CONTENT_MIN` (or its widest value when shorter); other
    columns of ``wrapping`` get what they need from the rest first, never less than :data:`WRAP_MIN`.
    """
    natural = {name: _natural(name, [row[i] for row in rows]) for i, name in enumerate(columns)}
    widths = {name: natural[name] for name in columns if name not in wrapping}
    free = [name for name in columns if name in wrapping and name not in CONTENT_COLUMNS]
    content = [name for name in columns if name in CONTENT_COLUMNS]
    for name in free:
        widths[name] = min(natural[name], WRAP_MIN)
    for name in content:
        widths[name] = min(natural[name], CONTENT_MIN)
    room = width - 1 - 3 * len(columns) - sum(widths.values())
    if room < 0:
        return None
    # Short free text (a status, a list of agents) gets its width first, then the content
    # column everything left: it already has its 30.
    for name in free + content:
        extra = min(room, natural[name] - widths[name])
        widths[name] += extra
        room -= extra
    return widths


def wrap(text: str, width: int) -> list[str]:
    """``text`` folded into lines of at most ``width`` cells, at spaces where it can (as :func:`textwrap.wrap`).

    Each line of ``text`` is a paragraph. One that fits is returned as is; a word longer
    than a line is cut; wide characters are folded by cells. The result is exactly
    ``textwrap.wrap(paragraph, width, break_on_hyphens=False)`` for each paragraph (an
    empty one gives one empty line), only faster for the usual single-spaced text.
    """
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        simple = paragraph.isprintable() and not paragraph.startswith(" ") and not paragraph.endswith(" ")
        if simple and cells_of(paragraph) <= width:
            lines.append(paragraph)  # textwrap would return it unchanged
            continue
        words = paragraph.split(" ")
        if simple and "" not in words and len(paragraph) == cells_of(paragraph) and max(map(len, words)) <= width:
            lines += _fill(words, width)
            continue
        wrapped = textwrap.wrap(paragraph, width, break_on_hyphens=False, drop_whitespace=True) or [""]
        for line in wrapped:
            while cells_of(line) > width:  # wide characters: fold by cells
                head = set_cell_size(line, width)
                lines.append(head)
                line = line[len(head) :]
            lines.append(line)
    return lines


def _fill(words: Sequence[str], width: int) -> list[str]:
    """Greedy filling of one-cell-per-character words, none wider than ``width``, single spaces between."""
    lines: list[str] = []
    line = words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    lines.append(line)
    return lines


class Grid:
    """A table laid out once, in plain Python, and printed as ready-made lines.

    Rich's own table measures and wraps every cell through its renderables, which costs
    milliseconds a row; a 2,000-row history must print in well under a second. The
    columns (see :func:`fit_columns` and :func:`column_widths`) are known up front, so each
    cell is wrapped (:func:`wrap`) and each line drawn with the box characters of rich's
    default table. Cells are plain strings; a row has one style (``dim`` rows), the header
    is bold.
    """

    def __init__(
        self,
        title: str | None,
        columns: Sequence[str],
        rows: Sequence[Sequence[str]],
        widths: Sequence[int],
        styles: Sequence[str] = (),
        *,
        note: str | None = None,
        wrapping: frozenset[str] = WRAPPING_COLUMNS,
        width: int | None = None,
    ):
        """Lay out ``rows`` under ``columns`` at ``widths`` (one per column); ``styles[i]`` styles row ``i``.

        ``note`` is printed under the title (what the layout stacked); ``wrapping`` names
        the columns whose text wraps; the title and note wrap at ``width`` (default: the
        table's own width).
        """
        self.title = title
        self.note = note
        self.columns = list(columns)
        self.rows = rows
        self.widths = list(widths)
        self.styles = list(styles)
        self.wrapping = wrapping
        self.width = width or (sum(self.widths) + 3 * len(self.widths) + 1)

    def _cell_lines(self, name: str, text: str, width: int) -> list[str]:
        """The lines of one cell, each padded to ``width`` cells."""
        if name not in self.wrapping:
            size = cells_of(text)
            if size <= width:
                return [text + " " * (width - size)]
            return [set_cell_size(text, width - 1) + "…"]
        return [line + " " * (width - cells_of(line)) for line in wrap(text, width)]

    def _edge(self, left: str, fill: str, cross: str, right: str) -> str:
        return left + cross.join(fill * (w + 2) for w in self.widths) + right

    def _row(self, cells: Sequence[str], bar: str) -> str:
        """One line of the table from cells already padded to their columns' widths."""
        return f"{bar} " + f" {bar} ".join(cells) + f" {bar}"

    def lines(self) -> Iterator[tuple[str, str]]:
        """Every line of the table with its style (``""`` for none), title and borders included."""
        if self.title:  # folded at word boundaries, never cut mid-word
            yield from ((line, "italic") for line in wrap(self.title, max(self.width, 20)))
        if self.note:
            yield from ((line, "dim") for line in wrap(self.note, max(self.width, 20)))
        yield self._edge("┏", "━", "┳", "┓"), ""
        yield (
            self._row([f"{name:<{width}}" for name, width in zip(self.columns, self.widths, strict=True)], "┃"),
            "bold",
        )
        yield self._edge("┡", "━", "╇", "┩"), ""
        for n, row in enumerate(self.rows):
            style = self.styles[n] if n < len(self.styles) else ""
            wrapped = [
                self._cell_lines(name, cell, width)
                for name, cell, width in zip(self.columns, row, self.widths, strict=True)
            ]
            height = max(len(w) for w in wrapped)
            if height == 1:
                yield self._row([w[0] for w in wrapped], "│"), style
                continue
            blank = [" " * width for width in self.widths]
            for i in range(height):
                yield self._row([w[i] if i < len(w) else blank[j] for j, w in enumerate(wrapped)], "│"), style
        yield self._edge("└", "─", "┴", "┘"), ""

    def __rich_console__(self, console: Console, options: Any) -> Iterator[Segment]:
        """Yield the table as segments, one a line (rich splits its segments at line ends anyway)."""
        parsed: dict[str, Style | None] = {"": None}
        for text, style in self.lines():
            if style not in parsed:
                parsed[style] = Style.parse(style)
            yield Segment(text + "\n", parsed[style])


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    *,
    drop: Sequence[str] = (),
    width: int | None = None,
    styles: Sequence[str] = (),
) -> Grid:
    """A table laid out for the terminal's width; ids, numbers and names never wrap, only free text does.

    Nothing is hidden. When the columns do not fit ``width`` (default: the console's), the
    columns named in ``drop`` give way, in that order, until they do (then, on a very
    narrow terminal, the one-line columns from the right); a column that gives way is
    *stacked*: its value is printed as ``name: value`` lines at the top of the row's
    content column (the fields of a row under each other), and a note under the title
    says which columns are stacked. The content column keeps at least
    :data:`CONTENT_MIN` characters and no column is squeezed to nothing. Row ``i`` is
    drawn in ``styles[i]`` (a rich style such as ``"dim"``) when given, else in the style
    of its first cell when that is a :class:`~rich.text.Text`.
    """
    # Ledger content is data, never rich markup: "[turn 3]" must print as is.
    given = [list(row) for row in rows]
    if not styles:
        styles = [str(row[0].style) if row and isinstance(row[0], Text) and row[0].style else "" for row in given]
    cells = [[_plain(cell) for cell in row] for row in given]
    width = width or console().width
    keep = fit_columns(columns, cells, width, drop)
    stacked = [name for name in columns if name not in keep]
    host = _host(keep) if stacked else None
    wrapping = WRAPPING_COLUMNS | ({host} if host else set())
    index = [columns.index(name) for name in keep]
    kept = [[row[i] for i in index] for row in cells]
    fields: list[list[str]] = []
    same: list[str] = []
    if host is not None:
        # A stacked column that holds one value in every row (the agent of a one-agent
        # session) is said once, in the note, instead of in every row.
        same = [n for n in stacked if len(cells) > 1 and len({row[columns.index(n)] for row in cells}) == 1]
        at = [(name, columns.index(name)) for name in stacked if name not in same]
        fields = [[f"{name}: {row[i]}" for name, i in at if row[i]] for row in cells]
    widths = column_widths(keep, kept, width, wrapping=wrapping)
    if widths is None:  # narrower than any layout: every column at its floor, the line overflows
        widths = {name: min(_natural(name, [r[i] for r in kept]), WRAP_MIN) for i, name in enumerate(keep)}
    elif host is not None:
        # Room left on the line widens the host up to its longest stacked field (else it wraps).
        longest = max((cells_of(f) for row in fields for f in row), default=0)
        room = width - 1 - sum(widths[name] + 3 for name in keep)
        widths[host] += max(0, min(room, longest - widths[host]))
    note = None
    if host is not None:
        h = keep.index(host)
        for row, own in zip(kept, fields, strict=True):
            if own:
                row[h] = "\n".join([*_pack(own, widths[host]), *([row[h]] if row[h] else [])])
        parts = []
        if len(same) < len(stacked):
            parts.append(f"{', '.join(n for n in stacked if n not in same)}: stacked in {host}")
        if same:
            parts.append("in every row: " + ", ".join(f"{n} {cells[0][columns.index(n)] or '(empty)'}" for n in same))
        note = f"{'; '.join(parts)} ({width} columns are too few for a column each)"
    return Grid(title, keep, kept, [widths[name] for name in keep], styles, note=note, wrapping=wrapping, width=width)


def _host(columns: Sequence[str]) -> str:
    """The column that holds a row's stacked fields: its content column, else its last wrapping one, else its last."""
    for name in columns:
        if name in CONTENT_COLUMNS:
            return name
    wrapping = [name for name in columns if name in WRAPPING_COLUMNS]
    return wrapping[-1] if wrapping else columns[-1]


def _pack(fields: Sequence[str], width: int) -> list[str]:
    """``name: value`` fields packed into lines of at most ``width`` cells, `` · `` between.

    A field is never split unless it is wider than a line by itself (then the cell wraps it).
    """
    lines: list[str] = []
    for item in fields:
        if lines and cells_of(lines[-1]) + 3 + cells_of(item) <= width:
            lines[-1] += " · " + item
        else:
            lines.append(item)
    return lines
