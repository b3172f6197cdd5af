"""``contextledger db upgrade`` / ``db current`` against real databases."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import make_url

from contextledger import Ledger, Message
from contextledger.cli import ExitCode

from .conftest import Invoke


def test_upgrade_creates_a_ledger_and_current_reports_head(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    url = f"sqlite:///{path}"
    result = invoke("db", "upgrade", "--url", url)
    assert result.exit_code == 0, result.stderr
    assert path.is_file()
    current = json.loads(invoke("db", "current", "--url", url, "--json").stdout)
    assert current["up_to_date"] is True
    assert current["current"] == current["head"]
    assert current["head"]
    assert current["schemaless"] is False
    again = invoke("db", "upgrade", "--url", url)
    assert again.exit_code == 0
    assert "already at" in again.stdout
    with Ledger.connect(url) as ledger:  # the upgraded file is a working ledger
        ledger.conversation("s", "a").append(Message.user("hello"))
        assert ledger.agents("s") == ["a"]
    table = invoke("db", "current", "--url", url)
    assert "up to date" in table.stdout


def test_current_on_a_missing_file(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("db", "current", "--url", f"sqlite:///{tmp_path / 'missing.db'}")
    assert result.exit_code == ExitCode.CONFIG
    assert not (tmp_path / "missing.db").exists()


def test_schemaless_backends(invoke: Invoke) -> None:
    document = json.loads(invoke("db", "current", "--url", "memory://", "--json").stdout)
    assert document["schemaless"] is True
    assert document["up_to_date"] is True
    result = invoke("db", "upgrade", "--url", "memory://")
    assert result.exit_code == 0
    assert "nothing to do" in result.stdout


def test_postgres_out_of_date_until_upgraded(invoke: Invoke, postgres_empty_url: str) -> None:
    before = invoke("sessions", "--url", postgres_empty_url)
    assert before.exit_code == ExitCode.SCHEMA
    assert before.stderr.startswith("error: ")
    assert "contextledger db upgrade" in before.stderr
    current = json.loads(invoke("db", "current", "--url", postgres_empty_url, "--json").stdout)
    assert current["current"] is None
    assert current["up_to_date"] is False
    upgraded = invoke("db", "upgrade", "--url", postgres_empty_url)
    assert upgraded.exit_code == 0, upgraded.stderr
    assert f"to {current['head']}" in upgraded.stdout
    after = invoke("sessions", "--url", postgres_empty_url, "--json")
    assert after.exit_code == 0
    assert json.loads(after.stdout) == []


def test_schemaless_commands_still_need_the_server(invoke: Invoke, redis_url: str) -> None:
    closed = "redis://127.0.0.1:1/0"
    for command in (("db", "current"), ("db", "upgrade")):
        result = invoke(*command, "--url", closed)
        assert result.exit_code == ExitCode.UNAVAILABLE, result.stderr
    document = json.loads(invoke("db", "current", "--url", redis_url, "--json").stdout)
    assert document["schemaless"] is True


def test_current_masks_the_password(invoke: Invoke, postgres_url: str) -> None:
    url = make_url(postgres_url).set(password="hunter2-secret")
    result = invoke("db", "current", "--url", url.render_as_string(hide_password=False), "--json")
    assert "hunter2-secret" not in result.stdout + result.stderr
