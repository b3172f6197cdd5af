"""Done when: an ADK agent runs turns with tools and an overflow, is killed (SIGKILL), and a new process restores it.

Two real child processes (``tests/adk/child.py``) on one ledger, on SQLite, PostgreSQL and Redis: the first is killed
while a tool runs; the second gets the same conversation back from the ledger, repaired
(the tool call that never got its response is answered as interrupted) and goes on.
Every model input of both is what ``view_at`` rebuilds, and ``contextledger show``
displays the session like any other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger
from contextledger.integrations.adk import contents_of, ledger_session_id
from contextledger.managers.repair import INTERRUPTED_TOOL_TEXT
from tests.adk.scenarios import APP, USER

ROOT = Path(__file__).resolve().parents[2]


def _child(command: str, url: str, session: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "tests.adk.child", command, "--url", url, "--session", session, "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
        check=False,
    )


def _inputs(ledger: Ledger, key: str, calls: int) -> list[list[dict[str, Any]]]:
    return [
        [c.model_dump(mode="json", exclude_none=True) for c in contents_of(ledger.view_at(key, model_call=n))]
        for n in range(1, calls + 1)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_killed_mid_tool_then_restored_in_a_new_process(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        url = request.getfixturevalue("sqlite_url")
    elif backend == "postgres":
        url = request.getfixturevalue("postgres_ledger_url")
    else:
        url = request.getfixturevalue("redis_url")  # the shared server; the session id is this test's own
    session = f"trip-{tmp_path.name}"
    key = ledger_session_id(APP, USER, session)

    killed = _child("run", url, session, tmp_path / "run.json")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    ran = json.loads((tmp_path / "run.json").read_text())
    assert ran["killed_in_tool"] == "Oslo"

    with Ledger.connect(url) as ledger:
        calls = ran["calls"]
        assert len(calls) == 8
        # Every model input of the killed process is what the ledger rebuilds (the last
        # call, which asked for the tool, was made after the file was written).
        assert _inputs(ledger, key, len(calls)) == calls
        assert any(r.trigger == "reactive" for r in ledger.reductions(key))
        history = ledger.history(key)
        last = history[-1].message
        assert last.tool_use_ids  # the call is stored; its response never was
        assert ledger.conversation(key).model_call_count == 9

    restored = _child("restore", url, session, tmp_path / "restore.json")
    assert restored.returncode == 0, restored.stderr[-3000:]
    after = json.loads((tmp_path / "restore.json").read_text())

    with Ledger.connect(url) as ledger:
        events = after["restored"]["events"]
        # 4 turns (4, 4, 2 and 4 events: the overflowed call left no event) and the killed one's 2.
        assert len(events) == 16
        assert [e["id"] for e in events] == [h.message.message_id for h in history]
        assert events[-1]["content"]["parts"][-1]["function_call"]["name"] == "book"
        state = after["restored"]["state"]
        assert (state["last_fact"], state["user:fact"]) == ("likes trains", "likes trains")
        assert state["app:remembered"] >= 1  # the app's counter (the shared Redis server keeps other runs')
        assert after["restored"]["model_call_count"] == 9
        # The new process's call saw the interrupted call answered, then the new question.
        texts = [
            p.get("function_response", {}).get("response", {}).get("result") for c in after["call"] for p in c["parts"]
        ]
        assert INTERRUPTED_TOOL_TEXT in texts
        assert after["last_text"] == "Did the booking work?"
        assert after["model_call_count"] == 10
        assert _inputs(ledger, key, 10)[9] == after["call"]
        assert [r.strategy for r in ledger.reductions(key) if r.trigger == "restore"] == ["tool_pair_repair"]

    shown = subprocess.run(
        [sys.executable, "-m", "contextledger", "show", key, "--url", url],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"},
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Did the booking work?" in shown.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "contextledger", "sessions", "--url", url, "--app", APP, "--user", USER, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=120,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert key in {s["session_id"] for s in json.loads(listed.stdout)}
