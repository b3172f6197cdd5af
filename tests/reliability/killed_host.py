"""A host's agent SIGKILLed while a tool runs, then resumed by a new process: the steps both host tests share.

The child module (``tests.<host>.child``) runs ``first`` (killed once its tool writes the
``in_tool`` marker) and ``resume``; it writes each model call's input to ``calls.jsonl``
and the resumed conversation to ``resumed.json`` under ``out``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli.app import app
from contextledger.web.app import create_app

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120


def child(module: str, command: str, url: str, out: Path) -> subprocess.Popen[str]:
    """Start ``python -m module command --url url --out out`` from the repository root."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-m", module, command, "--url", url, "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_in_tool(process: subprocess.Popen[str], marker: Path) -> None:
    """SIGKILL ``process`` once ``marker`` exists (its tool is running); fail if it never gets there."""
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"the child exited {process.returncode} before its tool ran:\n{output}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the child never reached its tool")
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=TIMEOUT) == -signal.SIGKILL


def kill_then_resume(module: str, url: str, out: Path) -> None:
    """Run the child's first process until it is killed mid-tool, then its resuming process to the end."""
    kill_in_tool(child(module, "first", url, out), out / "in_tool")
    resumed = child(module, "resume", url, out)
    output, _ = resumed.communicate(timeout=TIMEOUT)
    assert resumed.returncode == 0, output


def assert_recorded_reductions(ledger: Ledger, session: str) -> None:
    """The overflow was reduced reactively and the interrupted tool call repaired on restore."""
    reductions = {(r.trigger, r.strategy) for r in ledger.reductions(session)}
    assert ("reactive", "sliding_window") in reductions
    assert ("restore", "tool_pair_repair") in reductions


def assert_inspectors_show(ledger: Ledger, session: str, url: str, entry_ids: list[str]) -> None:
    """``contextledger show`` (now and at a call) and the web view display the conversation."""
    runner = CliRunner()
    shown = runner.invoke(app, ["show", session, "--url", url, "--json"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    (document,) = json.loads(shown.stdout)
    assert [e["entry_id"] for e in document["entries"]] == entry_ids
    at_call = runner.invoke(app, ["show", session, "--url", url, "--at-call", "2", "--json"])
    assert at_call.exit_code == 0, at_call.output
    (past,) = json.loads(at_call.stdout)
    assert [e["entry_id"] for e in past["entries"]] == ledger.view_at(session, model_call=2).ids
    table = runner.invoke(app, ["show", session, "--url", url], env={"COLUMNS": "200"})
    assert "B-2 was interrupted" in table.stdout
    with TestClient(create_app(ledger)) as web:
        page = web.get("/session", params={"id": session})
        assert page.status_code == 200
        assert "B-2 was interrupted; it is in Paris now." in page.text
        assert "tool_pair_repair" in page.text
