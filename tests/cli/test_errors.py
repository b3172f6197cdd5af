"""One-line errors and documented exit codes, through the Typer app and the console script."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from contextledger import Ledger, Message
from contextledger.cli import ExitCode
from contextledger.cli.errors import exit_code_for, mask_secrets
from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    InvalidLedgerURL,
    SchemaOutOfDate,
    SessionNotFound,
    StoreError,
    StoreUnavailable,
)

from .conftest import Invoke

SCRIPT = Path(sys.executable).with_name("contextledger")


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _one_line_error(stderr: str) -> str:
    assert stderr.startswith("error: "), stderr
    assert stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    return stderr


@pytest.mark.parametrize(
    "url",
    ["nonsense", "ftp://example.invalid/ledger", "sqlite:/missing-slashes.db"],
)
def test_bad_url_is_a_config_error(invoke: Invoke, url: str) -> None:
    result = invoke("sessions", "--url", url)
    assert result.exit_code == ExitCode.CONFIG
    _one_line_error(result.stderr)


def test_missing_postgres_driver_is_a_config_error(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    result = invoke("sessions", "--url", f"postgresql://nobody@127.0.0.1:{_closed_port()}/x")
    assert result.exit_code == ExitCode.CONFIG
    assert "pip install 'contextledger[postgres]'" in _one_line_error(result.stderr)


def test_missing_sqlite_file_is_refused_not_created(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    result = invoke("sessions", "--url", f"sqlite:///{path}")
    assert result.exit_code == ExitCode.CONFIG
    assert "does not exist" in _one_line_error(result.stderr)
    assert not path.exists()


def test_unreachable_postgres(invoke: Invoke) -> None:
    url = f"postgresql+psycopg://ledger:s3cret-pw@127.0.0.1:{_closed_port()}/ledger?connect_timeout=2"
    result = invoke("sessions", "--url", url)
    assert result.exit_code == ExitCode.UNAVAILABLE, result.stderr
    assert "s3cret-pw" not in _one_line_error(result.stderr)


def test_unreachable_redis(invoke: Invoke) -> None:
    url = f"redis://:s3cret-pw@127.0.0.1:{_closed_port()}/0"
    result = invoke("sessions", "--url", url)
    assert result.exit_code == ExitCode.UNAVAILABLE, result.stderr
    assert "s3cret-pw" not in _one_line_error(result.stderr)


def test_schema_out_of_date(invoke: Invoke, sqlite_url: str, tmp_path: Path) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        ledger.conversation("s", "a").append(Message.user("hi"))
    # A schema written by a newer contextledger: this version must refuse it, not guess.
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("UPDATE contextledger_alembic_version SET version_num = 'ffffffffffff'")
    result = invoke("sessions", "--url", sqlite_url)
    assert result.exit_code == ExitCode.SCHEMA, result.stderr
    error = _one_line_error(result.stderr)
    # `db upgrade` cannot help (it would refuse the unknown revision): the advice must not loop
    assert "upgrade the contextledger package" in error
    assert "db upgrade" not in error
    current = invoke("db", "current", "--url", sqlite_url)
    assert current.exit_code == ExitCode.SCHEMA
    assert "upgrade the contextledger package" in current.stdout
    upgrade = invoke("db", "upgrade", "--url", sqlite_url)
    assert upgrade.exit_code == ExitCode.SCHEMA
    assert "db upgrade" not in _one_line_error(upgrade.stderr)


def test_usage_error(invoke: Invoke) -> None:
    result = invoke("sessions", "--limit", "0")
    assert result.exit_code == ExitCode.USAGE
    assert "Traceback" not in result.stderr


def test_help_documents_exit_codes(invoke: Invoke) -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for code in ExitCode:
        assert f"{int(code)} " in text
    assert "schema out of date" in text


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InvalidLedgerURL("x"), ExitCode.CONFIG),
        (ConfigurationError("x"), ExitCode.CONFIG),
        (StoreUnavailable("x"), ExitCode.UNAVAILABLE),
        (SessionNotFound("x"), ExitCode.NOT_FOUND),
        (SchemaOutOfDate("a", "b", "contextledger db upgrade"), ExitCode.SCHEMA),
        (ConcurrencyConflict("x"), ExitCode.ERROR),
        (StoreError("x"), ExitCode.ERROR),
    ],
)
def test_exit_code_mapping(error: Exception, code: ExitCode) -> None:
    assert exit_code_for(error) == code  # type: ignore[arg-type]


def test_mask_secrets() -> None:
    text = "cannot connect to postgresql+psycopg://bob:hunter2@db:5432/x (password hunter2 rejected)"
    masked = mask_secrets(text, "postgresql+psycopg://bob:hunter2@db:5432/x")
    assert "hunter2" not in masked
    assert "bob:***@db" in masked


def test_console_script_entry_point(tmp_path: Path) -> None:
    assert SCRIPT.is_file(), f"the console script is not installed next to {sys.executable}"
    version = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert version.returncode == 0
    assert version.stdout.startswith("contextledger ")
    missing = subprocess.run(
        [str(SCRIPT), "show", "nobody", "--url", f"sqlite:///{tmp_path / 'none.db'}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert missing.returncode == ExitCode.CONFIG
    assert missing.stderr.startswith("error: ")
    assert "Traceback" not in missing.stderr
