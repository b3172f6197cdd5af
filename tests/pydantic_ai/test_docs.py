"""The Pydantic AI page of the docs runs as written: its Python blocks in order, offline, in a fresh directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextledger import Ledger
from tests.langchain.test_docs import ROOT, run_page


def test_the_pydantic_ai_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_page(ROOT / "docs" / "hosts" / "pydantic-ai.md") == 3
    with Ledger.connect("sqlite:///pydantic_ai.db") as ledger:
        assert ledger.conversation("customer-8").model_call_count == 6
        assert {r.trigger for r in ledger.reductions("notes")} == {"per_turn"}
