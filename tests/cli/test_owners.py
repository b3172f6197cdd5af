"""``contextledger sessions --app --user``: the sessions of an app or a user, on every backend, read only."""

from __future__ import annotations

import json
from typing import Any

from contextledger import Ledger, Message
from tests.cli.conftest import Invoke


def _fill(url: str) -> None:
    """Four sessions; the shared Redis server of the CLI tests holds others' too, so the names are this test's."""
    with Ledger.connect(url) as ledger:
        for session_id, app, user in (
            ("ada-shop", "shop", "ada"),
            ("bob-shop", "shop", "bob"),
            ("ada-bank", "bank", "ada"),
            ("nobody", None, None),
        ):
            ledger.conversation(session_id, app=app, user=user).append(Message.user(f"hi from {session_id}"))


def _listed(invoke: Invoke, url: str, *args: str) -> list[dict[str, Any]]:
    result = invoke("sessions", "--url", url, "--json", *args)
    assert result.exit_code == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)
    return found


def test_sessions_filter_by_app_and_user(invoke: Invoke, ledger_url: str) -> None:
    _fill(ledger_url)
    mine = {"ada-shop", "bob-shop", "ada-bank", "nobody"}
    everything = {
        s["session_id"]: (s["app"], s["user"]) for s in _listed(invoke, ledger_url) if s["session_id"] in mine
    }
    assert everything == {
        "ada-shop": ("shop", "ada"),
        "bob-shop": ("shop", "bob"),
        "ada-bank": ("bank", "ada"),
        "nobody": (None, None),
    }
    assert sorted(s["session_id"] for s in _listed(invoke, ledger_url, "--app", "shop")) == ["ada-shop", "bob-shop"]
    assert [s["session_id"] for s in _listed(invoke, ledger_url, "--app", "shop", "--user", "ada")] == ["ada-shop"]
    assert sorted(s["session_id"] for s in _listed(invoke, ledger_url, "--user", "ada")) == ["ada-bank", "ada-shop"]
    assert _listed(invoke, ledger_url, "--app", "none") == []


def test_the_table_shows_app_and_user_only_when_a_session_has_them(invoke: Invoke, sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        ledger.conversation("plain").append(Message.user("hi"))
    plain = invoke("sessions", "--url", sqlite_url)
    assert plain.exit_code == 0, plain.stderr
    assert "app" not in plain.stdout.split("\n", 3)[2]  # the header row of a ledger without apps is unchanged
    _fill(sqlite_url)
    table = invoke("sessions", "--url", sqlite_url)
    header = next(line for line in table.stdout.splitlines() if "session" in line and "agents" in line)
    assert "app" in header
    assert "user" in header
    assert "ada-shop" in table.stdout
    empty = invoke("sessions", "--url", sqlite_url, "--app", "gone", "--user", "eve")
    assert empty.exit_code == 0
    assert "no sessions of app 'gone' of user 'eve'" in empty.stdout


def test_an_empty_app_is_refused(invoke: Invoke, sqlite_url: str) -> None:
    _fill(sqlite_url)
    result = invoke("sessions", "--url", sqlite_url, "--app", "")
    assert result.exit_code != 0
    assert "app must be None or a non-empty string" in result.stderr
