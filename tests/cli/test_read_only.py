"""The inspector never changes a database: read-only opening, other applications' files left alone."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from contextledger import Ledger, Message
from contextledger.cli import ExitCode
from contextledger.cli.options import DEMO_URL, resolve_url
from contextledger.demo.runner import DEFAULT_DEMO_URL
from contextledger.stores.sql import downgrade, head

from .conftest import Invoke

READERS = [
    ["sessions"],
    ["show", "s"],
    ["history", "s"],
    ["evictions", "s"],
    ["summaries", "s"],
    ["reductions", "s"],
    ["revisions", "s"],
    ["message", "abc"],
    ["export", "s"],
    ["timeline", "s", "-o", "never-written.html"],
    ["serve", "--port", "0"],
]


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture
def foreign(tmp_path: Path) -> Path:
    """Another application's SQLite file (rollback journal, its own tables)."""
    folder = tmp_path / "app"
    folder.mkdir()
    path = folder / "app.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
        db.execute("INSERT INTO orders (item) VALUES ('lamp')")
    return path


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_another_applications_file_is_not_a_ledger_and_is_left_alone(
    invoke: Invoke, foreign: Path, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(foreign.parent)
    before = _snapshot(foreign.parent)
    result = invoke(*args, "--url", f"sqlite:///{foreign}")
    assert result.exit_code == ExitCode.CONFIG, result.stderr
    assert "not a contextledger ledger" in result.stderr
    assert "Traceback" not in result.stderr
    assert _snapshot(foreign.parent) == before  # same bytes, no -wal/-shm, no new file
    with sqlite3.connect(foreign) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"orders"}


def test_db_current_reads_without_writing(invoke: Invoke, foreign: Path) -> None:
    before = _snapshot(foreign.parent)
    result = invoke("db", "current", "--url", f"sqlite:///{foreign}")
    assert result.exit_code == ExitCode.SCHEMA
    assert "<none>" in result.stdout
    assert _snapshot(foreign.parent) == before


def test_reading_a_ledger_changes_no_byte_of_it(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("s", "a")
        (first,) = conversation.append(Message.user("hello"))
        conversation.append(Message.assistant("hi"))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    readers = [a for a in READERS if a[0] not in ("message", "timeline", "serve")]
    for args in (*readers, ["message", first.message_id], ["db", "current"]):
        result = invoke(*args, "--url", url)
        assert result.exit_code == 0, (args, result.stderr)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_db_current_fails_when_the_schema_is_behind(invoke: Invoke, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.connect(url).close()
    assert invoke("db", "current", "--url", url).exit_code == 0
    downgrade(url, "base")  # every ledger table dropped: the schema is behind (absent)
    result = invoke("db", "current", "--url", url, "--json")
    assert result.exit_code == ExitCode.SCHEMA
    assert '"up_to_date": false' in result.stdout
    assert head() in result.stdout


def test_a_missing_file_is_refused_and_not_created(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("history", "s", "--url", f"sqlite:///{tmp_path / 'nope.db'}")
    assert result.exit_code == ExitCode.CONFIG
    assert list(tmp_path.iterdir()) == []


def test_no_url_reads_the_default_file_else_the_demos(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert DEMO_URL == DEFAULT_DEMO_URL
    assert resolve_url(None) == "sqlite:///contextledger.db"
    (tmp_path / "contextledger-demo.db").touch()
    assert resolve_url(None) == DEMO_URL
    (tmp_path / "contextledger.db").touch()
    assert resolve_url(None) == "sqlite:///contextledger.db"
    assert resolve_url("memory://") == "memory://"


def test_sessions_right_after_demo(invoke: Invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    demo = invoke("demo", "--turns", "4", "--sessions", "2", "--json")
    assert demo.exit_code == 0, demo.stderr
    listed = invoke("sessions")
    assert listed.exit_code == 0, listed.stderr
    assert "demo-1-trip" in listed.stdout
    assert "demo-2-support" in listed.stdout
    assert not (tmp_path / "contextledger.db").exists()  # nothing created where the default would be
