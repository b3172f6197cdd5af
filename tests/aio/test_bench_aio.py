"""``benchmarks/aio.py`` runs end to end and counts hops per append (none inline, one on a worker); no timing here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_async_benchmark_runs_and_counts_the_hops_per_append(tmp_path: Path) -> None:
    figures = tmp_path / "aio.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    argv = ["--backends", "memory,sqlite", "--appends", "5", "--restores", "2", "--window", "10"]
    argv += ["--conversations", "4", "--turns", "1", "--rounds", "1", "--json", str(figures)]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "aio.py"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| SQLite (file, WAL) | bridge |" in done.stdout  # 0.2's bridge measured beside the async API
    payload = json.loads(figures.read_text())["figures"]
    assert set(payload) == {"memory", "sqlite"}
    for backend in ("memory", "sqlite"):
        assert payload[backend]["append async hops"] == 0.0  # inline, the default here: no hand-over at all
        assert payload[backend]["append worker hops"] == 1.0  # inline=False: one per append
        assert payload[backend]["append sync cpu"] > 0
    assert payload["sqlite"]["many async tasks msg/s"] > 0
    assert payload["sqlite"]["many worker tasks msg/s"] > 0
