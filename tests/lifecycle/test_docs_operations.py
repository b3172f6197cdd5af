"""The examples of the operations pages (erasure, retention, encryption) run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations"
PAGES = ["erasure.md", "retention.md", "encryption.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_the_page_run_in_order(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONTEXTLEDGER_ENCRYPTION_KEYS", raising=False)
    blocks = BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))
    assert blocks, page
    for number, source in enumerate(blocks, start=1):
        code = compile(source, f"{page} (python block {number})", "exec")
        exec(code, {"__name__": f"docs_{number}"})
