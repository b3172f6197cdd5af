"""Fixtures for the Strands integration tests: ledgers and a runner for child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextledger.aio.runner import Runner
from contextledger.ledger import Ledger
from contextledger.stores.memory import MemoryStore
from tests.strands.scenarios import loads

ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT = 120


@pytest.fixture(autouse=True)
def _quiet_strands() -> Iterator[None]:
    # Strands warns about unset context windows and agent-level storage; not what these tests check.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of every callback's work handed to a worker thread, in order."""
    handed: list[str] = []
    run = Runner.run

    async def counted(self: Runner, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        handed.append(getattr(fn, "__name__", repr(fn)))
        return await run(self, fn, *args, **kwargs)

    monkeypatch.setattr(Runner, "run", counted)
    return handed


@pytest.fixture
def memory_ledger() -> Iterator[Ledger]:
    ledger = Ledger(MemoryStore())
    yield ledger
    ledger.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'agents.db'}"


def run_child(*args: str, out: Path, expect_exit: int = 0) -> Any:
    """Run ``python -m tests.strands.child`` in a fresh interpreter and return what it wrote."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.strands.child", *args, "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert proc.returncode == expect_exit, f"child exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return loads(out.read_text())


@pytest.fixture
def invoke_cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run ``contextledger ARGS`` in-process and return its output (exit code 0 required)."""
    from typer.testing import CliRunner

    from contextledger.cli.app import app

    monkeypatch.delenv("CONTEXTLEDGER_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> str:
        result = CliRunner().invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    return run
