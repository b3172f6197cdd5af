"""Every listing at 80 and 200 columns: nothing collapses, the content keeps 30 characters."""

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


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("command", sorted(LISTINGS))
@pytest.mark.parametrize("width", [80, 200])
def test_listing_fits_the_terminal(invoke: Invoke, populated: Populated, command: str, width: int) -> None:
    args, columns = LISTINGS[command]
    result = invoke(command, *args, "--url", populated.url, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= width
    tables = _headers(result.stdout)
    assert tables, result.stdout
    for header in tables:
        names = [name for name, _ in header]
        assert set(names) <= set(columns), names  # no header cut short
        assert all(size >= len(name) + 2 for name, size in header)  # none squeezed below its name
        content = [size - 2 for name, size in header if name in CONTENT_COLUMNS]
        assert len(content) == 1, names
        if width == 200:
            assert names == columns  # nothing gives way on a wide terminal
        elif command != "sessions":  # session ids are short: their column needs no 30
            assert content[0] >= CONTENT_MIN
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
    narrow = _headers(invoke("history", "alpha", "--url", populated.url, env={"COLUMNS": "80"}).stdout)[0]
    names = [name for name, _ in narrow]
    assert "status" in names
    assert "content" in names
    assert "revs" not in names  # the first to go
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
