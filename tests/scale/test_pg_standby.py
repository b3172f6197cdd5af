"""PostgreSQL with a streaming standby: reading on the standby, and a failover with synchronous replication.

The readers -- the inspector (``sessions``, ``show``, ``history``), ``serve`` and
``view_at`` -- work on a hot standby's URL and send it no write: the standby logs every
statement (``log_statement=all``) and the test finds none that writes, no lock, and no
error. With the standby in ``synchronous_standby_names``, a primary SIGKILLed under
writers loses no acknowledged commit once the standby is promoted, and a ledger whose URL
names both servers (libpq's ``target_session_attrs=read-write``) carries on with typed errors.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextledger import Ledger, Message, SummarizingConversationManager
from contextledger.errors import StoreUnavailable
from contextledger.stores.capabilities import complete
from contextledger.stores.sql import upgrade
from tests.plugins import unavailable
from tests.plugins.postgres_standby import PostgresPair, start_primary_and_standby
from tests.scale.failover import Writer, check_conversation

WRITES = re.compile(
    r"statement: .*\b(INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|TRUNCATE|LOCK|COPY|GRANT|nextval|pg_advisory\w*)\b",
    re.IGNORECASE,
)


def _pair(**options: object) -> PostgresPair:
    try:
        return start_primary_and_standby(**options)  # type: ignore[arg-type]
    except StoreUnavailable as exc:
        unavailable(f"a PostgreSQL primary with a standby could not be started: {exc}")


@pytest.fixture(scope="module")
def standby_pair() -> Iterator[PostgresPair]:
    pair = _pair(synchronous=True, standby_settings={"log_statement": "all"})
    yield pair
    pair.stop()


def _summarize(messages: list[Message]) -> str:
    return f"summary of {len(messages)} messages"


def _write_session(url: str) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=_summarize)
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("s", manager=manager)
        for turn in range(6):
            conversation.append(Message.user(f"question {turn}", message_id=f"u{turn}"))
            conversation.before_model_call()
            conversation.after_model_call()
            conversation.append(Message.assistant(f"answer {turn}", message_id=f"a{turn}"))
        conversation.reduce("manual")
        conversation.pin("u5")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextledger", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _serve_pages(url: str, paths: list[str]) -> list[str]:
    """Run ``contextledger serve`` on ``url``, fetch ``paths``, stop it by its pid."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "contextledger", "serve", "--url", url, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        pages: list[str] = []
        for path in paths:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
                        assert reply.status == 200
                        pages.append(reply.read().decode())
                        break
                except OSError:
                    assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                    assert time.monotonic() < deadline, "serve did not answer"
                    time.sleep(0.2)
        return pages
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_readers_work_on_a_hot_standby_and_never_write(standby_pair: PostgresPair) -> None:
    primary_url = standby_pair.primary.url_for("postgres")
    standby_url = standby_pair.standby.url_for("postgres")
    upgrade(primary_url)
    _write_session(primary_url)
    standby_pair.wait_replayed()
    log = standby_pair.standby.directory / "postgres.log"
    mark = log.stat().st_size

    for args, expected in ((["sessions"], "s"), (["show", "s"], "answer 5"), (["history", "s"], "question 0")):
        done = _cli(*args, "--url", standby_url)
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout
    with Ledger.connect(primary_url) as on_primary, Ledger.connect(standby_url) as on_standby:
        for call in (1, 3, 6):
            expected_view = on_primary.view_at("s", model_call=call)
            seen = on_standby.view_at("s", model_call=call)
            assert seen.ids == expected_view.ids
            assert seen.messages == expected_view.messages
        assert on_standby.history("s") == on_primary.history("s")
    sessions_page, session_page = _serve_pages(standby_url, ["/", "/session?id=s"])
    assert "s" in sessions_page
    assert "answer 5" in session_page

    written = Path(log).read_bytes()[mark:].decode(errors="replace").splitlines()
    assert any("statement: SELECT" in line for line in written), "the standby logged no statement"
    assert [line for line in written if WRITES.search(line)] == []
    assert [line for line in written if "ERROR:" in line] == []


def test_a_promoted_synchronous_standby_has_every_acknowledged_commit() -> None:
    pair = _pair(synchronous=True)
    try:
        upgrade(pair.primary.url_for("postgres"))
        ledger = Ledger.connect(pair.url("postgres", connect_timeout="3"))
        deadline = time.monotonic() + 120
        crew = [Writer(ledger, f"w{i}", deadline) for i in range(3)]
        for writer in crew:
            writer.start()
        while not all(len(w.acked) >= 20 for w in crew):
            assert time.monotonic() < deadline, "no writes before the kill"
            time.sleep(0.05)
        killed_at = time.monotonic()
        pair.kill_primary()
        time.sleep(0.5)  # the writers meet the dead primary first
        pair.promote()
        while not all(w.acked_since(killed_at) >= 20 for w in crew):
            assert time.monotonic() < deadline, "the writers did not carry on after the promotion"
            time.sleep(0.05)
        for writer in crew:
            writer.join()
        errors: Counter[str] = Counter()
        for writer in crew:
            errors.update(writer.errors)
        assert [u for w in crew for u in w.untyped] == []
        assert errors, "the writers met no error: the failover was not exercised"
        lost = [check_conversation(complete(ledger.store, "tests"), w.session_id, set(w.acked)) for w in crew]
        assert lost == [set(), set(), set()]
        ledger.close()
    finally:
        pair.stop()
