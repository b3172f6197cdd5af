"""A process killed during a model call: which model-call count survives, at once and deferred.

A real subprocess (:mod:`tests.reliability.count_child`) makes a few turns on SQLite, then a
model call whose answer never comes, and is SIGKILLed. Counted at once (the default) the
killed call is on record; deferred (``defer_count=True``) it is not, and every call
before it is. Either way each recorded call is what ``view_at`` rebuilds, and a new
process carries on from the ledger alone.
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

from contextledger import Ledger, Message
from contextledger.errors import ModelCallNotFound
from tests.reliability.count_child import SESSION

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
TURNS = 4


def run_and_kill(url: str, out: Path, mode: str) -> list[list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.count_child", url, str(out), str(TURNS), mode],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while not (out / "ready").exists():
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"the child exited {process.returncode} before its last call:\n{output}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the child never reached its last call")
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=TIMEOUT) == -signal.SIGKILL
    if process.stdout is not None:
        process.stdout.close()
    return [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("mode", ["at-once", "deferred"])
def test_killed_during_a_model_call(tmp_path: Path, sqlite_url: str, mode: str) -> None:
    calls = run_and_kill(sqlite_url, tmp_path, mode)
    assert len(calls) == TURNS + 1
    with Ledger.connect(sqlite_url) as ledger:
        survived = ledger.conversation(SESSION).model_call_count
        # At once the killed call was counted before the model was called; deferred its
        # count waited for the answer, which never came. Nothing else is lost either way.
        assert survived == (TURNS + 1 if mode == "at-once" else TURNS)
        for n, seen in enumerate(calls[:survived], start=1):
            assert ledger.view_at(SESSION, model_call=n).ids == seen, f"model call {n}"
        if mode == "deferred":
            with pytest.raises(ModelCallNotFound):
                ledger.view_at(SESSION, model_call=TURNS + 1)
        # A new process carries on: its call is the next number, its input what view_at gives back.
        conversation = ledger.conversation(SESSION, defer_count=mode == "deferred")
        conversation.before_model_call()
        seen = conversation.view.ids
        conversation.append(Message.assistant("after the restart"))
        assert conversation.model_call_count == survived + 1
        assert ledger.view_at(SESSION, model_call=survived + 1).ids == seen
        if mode == "deferred":  # the call made again took the lost call's number, with the same input
            assert seen == calls[-1]
