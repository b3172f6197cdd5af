"""Following a running agent: the session page updates without a reload, ``tail`` prints as it commits.

A writer thread drives a real ``Conversation`` on the ledger while the page (in
Chromium) and ``contextledger tail`` (a process) read it; an idle page asks with
``If-None-Match`` and gets ``304`` with no body. Serving and tailing write nothing.
"""

from __future__ import annotations

import hashlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextledger import ContextWindowOverflowError, Ledger, Message
from contextledger.cli.tail import Follower
from contextledger.managers import SlidingWindowConversationManager

from .conftest import Server, serving
from .test_browser import ready

SID = "live-1"


def seed(url: str) -> None:
    with Ledger.connect(url) as ledger:
        for agent in ("lead", "helper"):
            conversation = ledger.conversation(SID, agent, manager=SlidingWindowConversationManager(window_size=6))
            conversation.append(Message.user(f"{agent}: start"))
            conversation.before_model_call()
            conversation.append(Message.assistant("ready"))


def write_turns(url: str, turns: int, pause: float, tag: str = "turn") -> None:
    """What a running agent commits: prompts, model calls, answers, a pin, a reactive reduction."""
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation(SID, "lead", manager=SlidingWindowConversationManager(window_size=6))
        for turn in range(turns):
            (prompt,) = conversation.append(Message.user(f"{tag}-{turn}: what next?"))
            conversation.before_model_call()
            conversation.append(Message.assistant(f"answer {turn}"))
            conversation.after_model_call()
            if turn == 1:
                conversation.pin(prompt.message_id)
            if turn == turns - 1:
                conversation.reduce("reactive", error=ContextWindowOverflowError("input too long"))
            time.sleep(pause)


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[Path, str, Server]]:
    folder = tmp_path / "ledger"
    folder.mkdir()
    path = folder / "live.db"
    url = f"sqlite:///{path}"
    seed(url)
    with serving(path, tmp_path) as server:
        yield path, url, server


def test_the_page_follows_a_running_agent_without_a_reload(page: Any, live: tuple[Path, str, Server]) -> None:
    _path, url, server = live
    session_url = f"{server.base}/session?id={SID}"
    page.goto(session_url)
    ready(page)
    page.evaluate("window.__same_document = true")
    calls_before = int(page.locator("#stats-lead dd.calls").inner_text())
    writer = threading.Thread(target=write_turns, args=(url, 4, 0.4))
    writer.start()
    writer.join(timeout=60)
    with Ledger.connect(url, read_only=True) as ledger:
        snapshot = ledger.store.load(SID, "lead")
        reductions = ledger.reductions(SID, "lead")
        pins = ledger.pin_history(SID, "lead")
    assert snapshot is not None
    final = snapshot.state.model_call_count
    assert final > calls_before
    page.wait_for_function(
        "n => document.querySelector('#stats-lead dd.calls').textContent === String(n)", arg=final, timeout=20_000
    )
    page.wait_for_function(
        "n => document.querySelectorAll('#reductions-part tbody tr').length === n", arg=len(reductions)
    )
    assert page.locator("#reductions-part tbody tr").first.get_attribute("data-trigger") == "reactive"
    assert page.locator("#pins-lead tbody tr").count() == len(pins) == 1
    assert "turn-3: what next?" in page.locator("#view-lead").inner_text()
    # the chart took the new data: the reductions, the pin, the count of calls
    chart = page.evaluate("JSON.parse(document.getElementById('chart-data').textContent)")
    (lead,) = [a for a in chart["agents"] if a["id"] == "lead"]
    assert len(lead["reductions"]["t"]) == len(reductions)
    assert len(lead["pins"]["t"]) == len(pins)
    assert lead["now"]["calls"] == final
    assert int(page.evaluate("document.getElementById('timeline').dataset.reductionsShown")) == len(reductions)
    assert page.evaluate("window.__same_document") is True
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    # once the agent stops, the page keeps asking and the server answers 304, with no body
    answers: list[tuple[int, int]] = []

    def seen(response: Any) -> None:
        if response.url == session_url and response.request.resource_type == "fetch":
            size = 0 if response.status == 304 else len(response.body())
            answers.append((response.status, size))

    page.on("response", seen)
    page.wait_for_timeout(5_000)
    assert len(answers) >= 2
    assert set(answers) == {(304, 0)}
    page.watch.clean()


# `contextledger ...` as a user's terminal starts it, with Ctrl-C delivered: a suite started
# from a background job of a non-interactive shell has SIGINT ignored, and a child inherits
# that (Python then installs no KeyboardInterrupt handler), so the child restores it first.
CLI = [
    sys.executable,
    "-c",
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('contextledger', run_name='__main__', alter_sys=True)",
]


def _lines(process: subprocess.Popen[str], out: queue.Queue[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        out.put(line)


def wait_for(lines: queue.Queue[str], seen: list[str], wanted: str, deadline: float) -> None:
    while not any(wanted in line for line in seen):
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{wanted!r} never printed: {seen}"
        try:
            seen.append(lines.get(timeout=remaining))
        except queue.Empty:
            continue


def test_tail_prints_what_commits_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    path = tmp_path / "tail.db"
    url = f"sqlite:///{path}"
    seed(url)
    env = {**os.environ, "COLUMNS": "200"}
    process = subprocess.Popen(
        [*CLI, "tail", SID, "--url", url, "--interval", "0.2", "--last", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        wait_for(lines, seen, "following live-1", time.monotonic() + 30)
        assert any("lead" in line and "agent" in line for line in seen)
        write_turns(url, 3, 0.3, tag="tailed")
        deadline = time.monotonic() + 30
        for wanted in ("tailed-2: what next?", "model call", "pinned by api", "reactive · sliding_window"):
            wait_for(lines, seen, wanted, deadline)
        reduction = next(line for line in seen if "reactive · sliding_window" in line)
        assert "ContextWindowOverflowError: input too long" in reduction  # why it ran
        process.send_signal(signal.SIGINT)
        # Generous: on a loaded machine the interpreter may take a while to be scheduled;
        # what is tested is the exit code, not how fast it comes.
        assert process.wait(timeout=90) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_tail_of_a_missing_session_says_so(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    seed(f"sqlite:///{path}")
    done = subprocess.run(
        [sys.executable, "-m", "contextledger", "tail", "nope", "--url", f"sqlite:///{path}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 5
    assert "nope" in done.stderr


def test_serving_and_tailing_write_nothing(context: Any, tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    folder.mkdir()
    path = folder / "quiet.db"
    url = f"sqlite:///{path}"
    seed(url)
    write_turns(url, 3, 0)
    before = digest(folder)
    page = context.new_page()
    with serving(path, tmp_path) as server:
        for address in (
            f"{server.base}/",
            f"{server.base}/session?id={SID}",
            f"{server.base}/session?id={SID}&agent=lead&q=what",
        ):
            page.goto(address)
        ready(page)
        tail = subprocess.Popen(
            [*CLI, "tail", SID, "--url", url, "--interval", "0.2"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            page.wait_for_timeout(3_000)  # the page polls, tail polls
        finally:
            tail.send_signal(signal.SIGINT)
            assert tail.wait(timeout=20) == 130
    after = digest(folder)
    assert after["quiet.db"] == before["quiet.db"]
    # A reader of a WAL database may leave SQLite's shared-memory index (-shm) and an empty
    # log behind; neither holds a byte of the ledger, and the log holds no transaction.
    assert set(after) - set(before) <= {"quiet.db-wal", "quiet.db-shm"}
    wal = folder / "quiet.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0


def test_tail_reports_messages_appended_and_evicted_between_two_looks() -> None:
    with Ledger.connect("memory://") as ledger:
        conversation = ledger.conversation(SID, "lead", manager=SlidingWindowConversationManager(window_size=2))
        conversation.append(Message.user("first"))
        follower = Follower(ledger, SID)
        backlog = follower.backlog(5)
        assert [e.kind for e in backlog] == ["agent", "message"]
        assert follower.poll() == []  # nothing committed: nothing to say
        for turn in range(4):
            conversation.append(Message.user(f"q{turn}"), Message.assistant(f"a{turn}"))
        conversation.before_model_call()
        conversation.reduce("manual")
        conversation.pin(conversation.view[-1].entry_id)
        events = follower.poll()
        texts = [e.text for e in events]
        assert [t for t in texts if t.startswith(("user: q", "assistant: a"))] == [
            f"{role}: {kind}{turn}" + (" (already evicted)" if turn < 3 else "")
            for turn in range(4)
            for role, kind in (("user", "q"), ("assistant", "a"))
        ]
        assert "model call 1" in texts
        (reduction,) = [e for e in events if e.kind == "reduction"]
        assert reduction.text.startswith("manual · sliding_window at call 1")
        assert reduction.text.endswith("— evicted 7 of 9 entries (window 2)")  # why: the manager's detail
        assert [e.text.split(":")[0] for e in events if e.kind == "pin"] == ["pinned by api"]
        assert follower.poll() == []
