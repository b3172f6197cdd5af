"""Done when: a LangChain agent with tools and an overflow is SIGKILLed mid-tool; a new process continues.

The first process is a real subprocess killed with SIGKILL while a tool runs; the second
starts from the ledger alone. Every model call of both, as the model received it, is
what ``view_at`` gives back; ``contextledger show`` and the web view show the session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage, messages_from_dict
from starlette.testclient import TestClient
from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli.app import app
from contextledger.integrations.langchain import from_view
from contextledger.web.app import create_app
from tests.langchain.child import SESSION

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120


def child(command: str, url: str, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.langchain.child", command, "--url", url, "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def kill_in_tool(process: subprocess.Popen[str], marker: Path) -> None:
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


@pytest.mark.slow
def test_killed_mid_tool_then_a_new_process_continues_and_every_call_is_on_record(
    tmp_path: Path, sqlite_url: str
) -> None:
    kill_in_tool(child("first", sqlite_url, tmp_path), tmp_path / "in_tool")
    resumed = child("resume", sqlite_url, tmp_path)
    output, _ = resumed.communicate(timeout=TIMEOUT)
    assert resumed.returncode == 0, output

    calls = [messages_from_dict(json.loads(line)) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    with Ledger.connect(sqlite_url) as ledger:
        conversation = ledger.conversation(SESSION)
        assert conversation.model_call_count == len(calls) == 6  # 5 in the killed process (one overflowed), 1 after
        for n, received in enumerate(calls, start=1):
            assert from_view(ledger.view_at(SESSION, model_call=n)) == received, f"model call {n}"
        reductions = {(r.trigger, r.strategy) for r in ledger.reductions(SESSION)}
        assert ("reactive", "sliding_window") in reductions
        assert ("restore", "tool_pair_repair") in reductions
        # The new process's model got the interrupted call answered by the repair, then the new prompt.
        repaired = [m for m in calls[-1] if isinstance(m, ToolMessage) and m.tool_call_id == "call-b2"]
        assert [m.status for m in repaired] == ["error"]
        assert calls[-1][-1].content == "Any news on B-2?"
        final = messages_from_dict(json.loads((tmp_path / "resumed.json").read_text()))
        assert final == from_view(conversation.view)
        assert_inspectors_show(ledger, sqlite_url, final)


def assert_inspectors_show(ledger: Ledger, url: str, final: list[Any]) -> None:
    """``contextledger show`` (now and at a call) and the web view display the conversation."""
    runner = CliRunner()
    shown = runner.invoke(app, ["show", SESSION, "--url", url, "--json"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    (document,) = json.loads(shown.stdout)
    assert [e["entry_id"] for e in document["entries"]] == [m.id for m in final]
    at_call = runner.invoke(app, ["show", SESSION, "--url", url, "--at-call", "2", "--json"])
    assert at_call.exit_code == 0, at_call.output
    (past,) = json.loads(at_call.stdout)
    assert [e["entry_id"] for e in past["entries"]] == ledger.view_at(SESSION, model_call=2).ids
    table = runner.invoke(app, ["show", SESSION, "--url", url], env={"COLUMNS": "200"})
    assert "B-2 was interrupted" in table.stdout
    with TestClient(create_app(ledger)) as web:
        page = web.get("/session", params={"id": SESSION})
        assert page.status_code == 200
        assert "B-2 was interrupted; it is in Paris now." in page.text
        assert "tool_pair_repair" in page.text
