"""Every listing at 50, 80, 120 and 200 columns: nothing is hidden, nothing collapses, the content keeps 30 characters.

A column that does not fit is stacked -- its values printed as ``name: value`` at the
top of each row's content cell -- and a note under the title names it; the title folds
at word boundaries.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.text import Text

from contextledger.cli.render import CONTENT_COLUMNS, CONTENT_MIN, WRAPPING_COLUMNS, fit_columns

from .conftest import Invoke, Populated

LISTINGS: dict[str, tuple[list[str], list[str]]] = {
    # command -> (arguments, every column it has)
    "sessions": ([], ["session", "agents", "active", "total", "created", "updated"]),
    "show": (["alpha"], ["#", "seq", "kind", "role", "pin", "tokens", "content"]),
    "history": (["alpha"], ["agent", "seq", "kind", "id", "role", "status", "pin", "revs", "content"]),
    "evictions": (
        ["alpha"],
        ["evicted at", "agent", "seq", "kind", "id", "role", "trigger", "strategy", "reduction", "summary", "content"],
    ),
    "summaries": (
        ["alpha"],
        ["created", "agent", "id", "status", "replaces", "supersedes", "summarizer", "tokens", "content"],
    ),
    "reductions": (
        ["alpha"],
        [
            "when",
            "agent",
            "id",
            "trigger",
            "strategy",
            "call",
            "messages",
            "tokens",
            "evicted",
            "revised",
            "summary",
            "why",
        ],
    ),
    "revisions": (["alpha"], ["when", "agent", "message", "#", "reason", "reduction", "original"]),
    "pins": (["alpha"], ["when", "agent", "change", "by", "entry", "content"]),
}


def _headers(stdout: str) -> list[list[tuple[str, int]]]:
    """(name, width) of every column of every table printed (from the ┃ header rows)."""
    tables = []
    for line in stdout.splitlines():
        if line.startswith("┃"):
            cells = line.strip("┃").split("┃")
            tables.append([(cell.strip(), cell_len(cell)) for cell in cells])
    return tables


def _notes(stdout: str) -> list[str]:
    """The note of every table that stacked columns (the lines between its title and its top border)."""
    notes, current, before_table = [], "", True
    for line in stdout.splitlines():
        if line.startswith("┏"):
            notes.append(current)
            current, before_table = "", True
        elif before_table and not line.startswith(("┃", "┡", "│", "└")):
            current += " " + line
    return notes


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("command", sorted(LISTINGS))
@pytest.mark.parametrize("width", [50, 80, 120, 200])
def test_listing_fits_the_terminal_and_hides_nothing(
    invoke: Invoke, populated: Populated, command: str, width: int
) -> None:
    args, columns = LISTINGS[command]
    result = invoke(command, *args, "--url", populated.url, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= width
    tables = _headers(result.stdout)
    assert tables, result.stdout
    for header, note in zip(tables, _notes(result.stdout), strict=True):
        names = [name for name, _ in header]
        assert set(names) <= set(columns), names  # no header cut short
        assert all(size >= len(name) + 2 for name, size in header)  # none squeezed below its name
        content = [size - 2 for name, size in header if name in CONTENT_COLUMNS]
        assert len(content) == 1, names
        if width == 200:
            assert names == columns  # nothing gives way on a wide terminal
            assert "stacked" not in note
        elif command != "sessions" and width >= 80:  # session ids are short: their column needs no 30
            assert content[0] >= CONTENT_MIN
        missing = [name for name in columns if name not in names]
        for name in missing:  # never dropped without saying so: each one is named in the note
            assert f"{name}:" in note or f"{name}," in note or f" {name} " in note, (name, note)
        if missing:
            assert f"({width} columns are too few" in note
    for name in columns:  # and each stacked value is in its row, under its name
        if all(name not in [n for n, _ in header] for header in tables):
            stacked = [line for line in lines if f"{name}: " in line]
            note = " ".join(_notes(result.stdout))
            assert stacked or f"in every row: {name}" in note or f", {name} " in note, (name, result.stdout)
    # a one-line column is never cut: every id, number and name prints whole
    for line in lines:
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            names = [name for name, _ in tables[0]]
            for name, cell in zip(names, cells, strict=False):
                if name not in CONTENT_COLUMNS and name not in WRAPPING_COLUMNS:
                    assert not cell.endswith("…"), (name, line)


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
def test_low_value_columns_give_way_first(invoke: Invoke, populated: Populated) -> None:
    result = invoke("history", "alpha", "--url", populated.url, env={"COLUMNS": "80"})
    narrow = _headers(result.stdout)[0]
    names = [name for name, _ in narrow]
    assert "status" in names
    assert "content" in names
    assert "revs" not in names  # the first to give way ...
    assert "revs" in _notes(result.stdout)[0]  # ... and said to be stacked
    single = _headers(
        invoke("history", "alpha", "--agent", "main", "--url", populated.url, env={"COLUMNS": "80"}).stdout
    )
    assert "agent" not in [name for name, _ in single[0]]  # one agent: the agent column says nothing


@given(
    widths=st.lists(st.integers(min_value=1, max_value=40), min_size=2, max_size=10),
    content=st.integers(min_value=0, max_value=300),
    terminal=st.integers(min_value=60, max_value=250),
)
def test_fit_columns_keeps_key_and_content_and_fits(widths: list[int], content: int, terminal: int) -> None:
    columns = [f"c{i}" for i in range(len(widths))] + ["content"]
    row = [Text("x" * w) for w in widths] + [Text("y" * content)]
    keep = fit_columns(columns, [row], terminal, drop=columns[1:-1][::2])
    assert keep[0] == "c0"
    assert keep[-1] == "content"
    assert keep == [c for c in columns if c in keep]  # order kept
    need = 1 + sum(max(len(c), widths[columns.index(c)]) + 3 for c in keep[:-1]) + max(7, min(content, 30)) + 3
    assert need <= terminal or keep == ["c0", "content"]
    if keep != columns:  # something gave way only because everything did not fit
        full = 1 + sum(max(len(c), w) + 3 for c, w in zip(columns, widths, strict=False)) + max(7, min(content, 30)) + 3
        assert full > terminal


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("width", [50, 80, 120])
def test_the_columns_each_listing_is_about_keep_a_column(invoke: Invoke, populated: Populated, width: int) -> None:
    pins = [
        n for n, _ in _headers(invoke("pins", "alpha", "--url", populated.url, env={"COLUMNS": str(width)}).stdout)[0]
    ]
    reductions = [
        n
        for n, _ in _headers(invoke("reductions", "alpha", "--url", populated.url, env={"COLUMNS": str(width)}).stdout)[
            0
        ]
    ]
    if width >= 80:
        assert "when" in pins
        assert {"call", "strategy", "evicted", "trigger"} <= set(reductions)


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
def test_the_show_header_folds_at_words(invoke: Invoke, populated: Populated) -> None:
    result = invoke("show", "alpha", "--agent", "main", "--url", populated.url, env={"COLUMNS": "50"})
    assert result.exit_code == 0, result.stderr
    title = result.stdout.split("┏", 1)[0].split("\n")
    words = " ".join(title).split()
    assert "manager" in words  # the last word of the header is there whole
    for line in title:
        assert cell_len(line) <= 50
        assert not line.endswith("-")
