"""docs/hosts/adk.md: every Python block runs as written, offline, in order, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextledger import Ledger

PAGE = Path(__file__).resolve().parents[2] / "docs" / "hosts" / "adk.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.mark.filterwarnings("ignore:.*EXPERIMENTAL.*:UserWarning")
def test_every_python_block_runs_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [body for language, body in FENCE.findall(PAGE.read_text(encoding="utf-8")) if language == "python"]
    assert len(blocks) >= 5
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{PAGE.name} block {number}", "exec"), {"__name__": "docs_example"})
    with Ledger.connect("sqlite:///adk.db") as ledger:
        # The quickstart's session, reduced once after the overflow; bob's erased.
        assert [i.session_id for i in ledger.sessions(app="travel", user="ada")] == ["travel/ada/trip-1"]
        assert [r.trigger for r in ledger.reductions("travel/ada/trip-1")] == ["reactive"]
        assert ledger.user_state("travel", "bob") == {}
        assert ledger.app_state("travel") == {"season": "summer"}
