"""The LangChain page of the docs runs as written: its Python blocks in order, offline, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def run_page(page: Path) -> int:
    """Run every ``python`` block of ``page`` in order, each in fresh globals; the number of blocks run."""
    blocks = [body for language, body in FENCE.findall(page.read_text(encoding="utf-8")) if language == "python"]
    for index, block in enumerate(blocks):
        exec(compile(block, f"{page.name} block {index + 1}", "exec"), {"__name__": f"docs_{page.stem}"})
    return len(blocks)


def test_the_langchain_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_page(ROOT / "docs" / "hosts" / "langchain.md") == 3
    with Ledger.connect("sqlite:///langchain.db") as ledger:
        assert ledger.conversation("customer-7").model_call_count == 5
        assert [h.status for h in ledger.history("chat-ada")] == ["evicted"] * 4
