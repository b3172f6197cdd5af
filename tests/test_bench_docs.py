"""The README and docs/performance.md state no measured figure that `scripts/bench` does not rewrite.

A figure claiming a measurement -- a number with a unit of time, a ratio (``2.6x``), a
rate (``msg/s``), a size or a percentage -- may stand only between the generated
markers, which a full run replaces with its own targets table. Targets are phrased in
words outside them ("within twice the plain driver").
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from _contenders import select  # noqa: E402
from _docs import BEGIN, END, PAGES, block, rewrite  # noqa: E402
from _run import Run, Sizes  # noqa: E402
from _workers import Outcome  # noqa: E402

FIGURE = re.compile(r"(?<![\w.-])\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|us|s|x|%|msg/s|/s|KiB|MiB|GiB|KB|MB|GB)(?![\w/])")
GENERATED = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)


def figures(text: str) -> list[str]:
    """The measured-looking figures of ``text`` outside the generated blocks."""
    return [m.group(0) for m in FIGURE.finditer(GENERATED.sub("", text))]


def test_the_detector_finds_figures_and_ignores_the_generated_block() -> None:
    assert figures("an append took 0.71 ms, 4.0x the driver, 5,616 msg/s, 47.9 MiB, 13 %") == [
        "0.71 ms",
        "4.0x",
        "5,616 msg/s",
        "47.9 MiB",
        "13 %",
    ]
    assert figures(f"before\n{BEGIN}\n| append | 4.00x | 0.7 ms |\n{END}\nafter") == []
    # Words with digits are not figures: sizes of a workload, versions, names.
    assert figures("1,000,000 entries, 2 cores, Python 3.11, a 40-message window, 100 threads") == []


@pytest.mark.parametrize("page", PAGES)
def test_no_measured_figure_outside_the_generated_block(page: str) -> None:
    text = (ROOT / page).read_text()
    assert figures(text) == [], f"{page} states figures no run rewrites: move them between the markers or drop them"


def test_the_performance_page_has_the_generated_block() -> None:
    text = (ROOT / "docs" / "performance.md").read_text()
    assert text.count(BEGIN) == 1
    assert text.count(END) == 1
    assert text.index(BEGIN) < text.index(END)


def test_a_run_rewrites_only_between_the_markers(tmp_path: Path) -> None:
    run = Run(False, Sizes.of(True), select("cl-sqlite,raw-sqlite,oai-sqlite"), versions={"contextledger": "9.9"})
    run.load = (1.25, 2.5)
    run.put("append", "cl-sqlite", Outcome(samples=[0.002, 0.002, 0.002], cpu=[0.001, 0.001, 0.001]))
    run.put("append", "raw-sqlite", Outcome(samples=[0.001, 0.001, 0.001], cpu=[0.0005, 0.0005, 0.0005]))
    run.put("append", "oai-sqlite", Outcome(samples=[0.004, 0.004, 0.004], cpu=[0.003, 0.003, 0.003]))
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "performance.md"
    page.write_text(f"# Performance\n\nintro\n\n{BEGIN}\nold 9.0x\n{END}\n\noutro\n")
    (tmp_path / "README.md").write_text("# no markers here\n")

    assert rewrite(run, tmp_path) == [page]

    text = page.read_text()
    assert text.startswith("# Performance\n\nintro\n\n" + BEGIN + "\n")
    assert text.endswith(END + "\n\noutro\n")
    assert "old 9.0x" not in text
    assert block(run) in text
    assert "contextledger 9.9" in text
    assert "load average 1.2" in text
    # The raw-driver target shows both clocks; the peer row its setting and both ratios.
    assert "wall 2.00x (2.000 vs 1.000 ms), client CPU 2.00x (1.000 vs 0.500 ms)" in text
    assert "ahead of OpenAI Agents SQLiteSession on append at equal durability" in text
    assert "set here: synchronous=NORMAL" in text
    assert "wall 2.00x, client CPU 3.00x | wall met, CPU met" in text
    assert (tmp_path / "README.md").read_text() == "# no markers here\n"
    # A second run with the same figures changes nothing.
    assert rewrite(run, tmp_path) == []


def test_a_floor_written_by_hand_is_shown_without_a_target() -> None:
    run = Run(False, Sizes.of(True), select("cl-sqlite,pydantic-ai-json,oai-sqlite"), versions={"contextledger": "9.9"})
    run.load = (1.0, 1.0)
    run.put("append", "cl-sqlite", Outcome(samples=[0.002] * 3, cpu=[0.002] * 3))
    run.put("append", "pydantic-ai-json", Outcome(samples=[0.001] * 3, cpu=[0.001] * 3))
    run.put("append", "oai-sqlite", Outcome(samples=[0.004] * 3, cpu=[0.004] * 3))
    text = block(run)
    rows = [line for line in text.splitlines() if "Pydantic AI JSON rows per run" in line and "how many" in line]
    assert len(rows) == 1, text
    assert rows[0].endswith("| wall 0.50x, client CPU 0.50x | - |"), rows[0]
    assert "ahead of Pydantic AI JSON rows" not in text
    assert "ahead of OpenAI Agents SQLiteSession on append at equal durability" in text  # a peer keeps its target


def test_cachegrind_counts_are_read_by_function_and_in_total() -> None:
    from touched import Counts, parse

    text = (
        "desc: LL cache: 33554432 B, 64 B, 16-way associative\n"
        "cmd: python touched.py\n"
        "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\n"
        "fl=ceval.c\nfn=_PyEval_EvalFrameDefault\n"
        "10 100 5 2 40 4 3 20 2 1\n"
        "11 50 1 1\n"  # trailing events left out are zero
        "fl=json.c\nfn=encode\n"
        "7 30 0 0 9 1 1\n"
        "summary: 180 6 3 49 5 4 20 2 1\n"
    )
    total, functions = parse(text)
    assert total == Counts(instructions=180, fetch_misses=3, read_misses=4, write_misses=1)
    assert total.misses == 8
    assert functions == {
        "ceval.c:_PyEval_EvalFrameDefault": Counts(150, 3, 3, 1),
        "json.c:encode": Counts(30, 0, 1, 0),
    }
    assert total - functions["json.c:encode"] == Counts(150, 3, 3, 1)


def test_a_cachegrind_run_without_cache_simulation_is_refused() -> None:
    from touched import parse

    with pytest.raises(ValueError, match="no ILmr, DLmr, DLmw counted"):
        parse("events: Ir\nfl=a.c\nfn=f\n1 10\nsummary: 10\n")
