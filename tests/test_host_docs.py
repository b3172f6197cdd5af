"""The host pages of the docs run as written: every python block, in order, in a fresh directory, offline."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
PAGES = ["docs/hosts/strands.md", "docs/hosts/openai-agents.md"]


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_run_in_order(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = [body for language, body in FENCE.findall(text) if language == "python"]
    assert blocks, f"{page} has no python example"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Strands warns about an unset context window
        for number, block in enumerate(blocks, start=1):
            exec(compile(block, f"{page} block {number}", "exec"), namespace)


@pytest.mark.parametrize("page", PAGES)
def test_the_page_states_how_the_ledger_differs(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert "## Where the ledger differs" in text
    assert "| Topic |" in text
