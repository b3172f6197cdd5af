"""The table layout's fast paths give exactly what the general ones give."""

from __future__ import annotations

import io
import textwrap

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.text import Text

from contextledger.cli.render import cells_of, table, wrap

# Plain words, runs of spaces, wide (CJK) and zero-width characters, control codes, "…".
TEXT = st.lists(
    st.sampled_from(["a", "bc", "defgh", "x" * 14, " ", "  ", "…", "語", "\u200d", "\t", "\x07", "\n", "-"]),
    max_size=30,
).map("".join)

# What describe() makes: single-spaced words, maybe cut with "…" -- the fast path's case.
SENTENCE = st.lists(st.text(alphabet="abcdefgh…-[]", min_size=1, max_size=9), min_size=1, max_size=14).map(" ".join)


def reference_wrap(text: str, width: int) -> list[str]:
    """The layout before the fast paths: textwrap for every paragraph, then folding by cells."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        for line in textwrap.wrap(paragraph, width, break_on_hyphens=False, drop_whitespace=True) or [""]:
            while cell_len(line) > width:
                head = set_cell_size(line, width)
                lines.append(head)
                line = line[len(head) :]
            lines.append(line)
    return lines


@given(text=TEXT, width=st.integers(min_value=1, max_value=40))
def test_wrap_is_textwrap(text: str, width: int) -> None:
    assert wrap(text, width) == reference_wrap(text, width)


@given(text=SENTENCE, width=st.integers(min_value=1, max_value=30))
def test_wrap_of_single_spaced_words_is_textwrap(text: str, width: int) -> None:
    assert wrap(text, width) == reference_wrap(text, width)


@given(text=TEXT)
def test_cells_of_is_rich_cell_len(text: str) -> None:
    assert cells_of(text) == cell_len(text)


@given(
    rows=st.lists(st.tuples(TEXT, TEXT, st.booleans()), min_size=0, max_size=8),
    width=st.integers(min_value=40, max_value=200),
)
def test_row_styles_print_as_styled_text_cells(rows: list[tuple[str, str, bool]], width: int) -> None:
    """``styles=`` and Text cells carrying the row's style lay out and colour the same table."""
    columns = ["id", "content"]
    as_text = [[Text(a, style="dim" if dim else ""), Text(b)] for a, b, dim in rows]
    plain = [[a, b] for a, b, _ in rows]
    styles = ["dim" if dim else "" for _, _, dim in rows]

    def printed(grid: object) -> str:
        out = Console(file=io.StringIO(), width=width, force_terminal=True, color_system="standard")
        out.print(grid)
        value: str = out.file.getvalue()  # type: ignore[attr-defined]
        return value

    assert printed(table("t", columns, as_text, width=width)) == printed(
        table("t", columns, plain, width=width, styles=styles)
    )


def test_content_is_data_not_markup_and_control_codes_are_dropped() -> None:
    out = Console(file=io.StringIO(), width=80)
    out.print(table(None, ["id", "content"], [["[bold]1[/bold]", "ring\x07 the [red]bell[/red]\r"]], width=80))
    printed = out.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold]1[/bold]" in printed
    assert "ring the [red]bell[/red]" in printed
    assert "\x07" not in printed
    assert "\r" not in printed
