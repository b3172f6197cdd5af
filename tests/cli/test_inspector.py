"""The inspector commands through the real Typer app, against real ledgers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.cli import ExitCode
from contextledger.cli.inspector import TriggerName, parse_since
from contextledger.model.records import Trigger

from .conftest import Invoke, Populated


def _json(stdout: str) -> Any:
    return json.loads(stdout)


def test_sessions_lists_what_the_ledger_holds(invoke: Invoke, populated: Populated) -> None:
    result = invoke("sessions", "--url", populated.url, "--json")
    assert result.exit_code == 0, result.stderr
    listed = {s["session_id"]: s for s in _json(result.stdout)}
    with Ledger.connect(populated.url) as ledger:
        expected = {s.session_id: s for s in ledger.sessions()}
    assert {"alpha", "beta"} <= set(listed)
    assert set(listed) == set(expected)
    assert listed["alpha"]["agents"] == ["helper", "main"]
    assert listed["alpha"]["total_entries"] == expected["alpha"].total_entries
    table = invoke("sessions", "--url", populated.url)
    assert table.exit_code == 0
    assert "alpha" in table.stdout
    assert "beta" in table.stdout
    assert "helper, main" in table.stdout


def test_sessions_pages(invoke: Invoke, populated: Populated) -> None:
    first = _json(invoke("sessions", "--url", populated.url, "--json", "--limit", "1").stdout)
    second = _json(invoke("sessions", "--url", populated.url, "--json", "--limit", "1", "--offset", "1").stdout)
    assert isinstance(first, list)
    assert isinstance(second, list)
    assert len(first) == 1
    assert len(second) == 1
    assert first[0]["session_id"] != second[0]["session_id"]


def test_url_from_environment(invoke: Invoke, populated: Populated) -> None:
    result = invoke("sessions", "--json", env={"CONTEXTLEDGER_URL": populated.url})
    assert result.exit_code == 0, result.stderr
    assert "alpha" in {s["session_id"] for s in _json(result.stdout)}


def test_show_is_the_live_view(invoke: Invoke, populated: Populated) -> None:
    result = invoke("show", "alpha", "--url", populated.url, "--json")
    assert result.exit_code == 0, result.stderr
    documents = _json(result.stdout)
    assert isinstance(documents, list)
    assert [d["agent_id"] for d in documents] == ["helper", "main"]
    with Ledger.connect(populated.url) as ledger:
        for document in documents:
            snapshot = ledger.store.load("alpha", document["agent_id"])
            assert snapshot is not None
            assert [e["entry_id"] for e in document["entries"]] == [e.entry_id for e in snapshot.entries]
            assert document["model_call_count"] == snapshot.state.model_call_count
            assert document["version"] == snapshot.state.version
    main = next(d for d in documents if d["agent_id"] == "main")
    pinned = [e["entry_id"] for e in main["entries"] if e["pinned"]]
    assert pinned == [populated.pinned_id, populated.image_id]
    helper = next(d for d in documents if d["agent_id"] == "helper")
    assert [e["kind"] for e in helper["entries"]].count("summary") == 1
    # Binary content survives the JSON dump losslessly.
    image = next(e for e in main["entries"] if e["entry_id"] == populated.image_id)
    restored = Message.from_record(image["message"])
    assert restored.content[1]["image"]["source"]["bytes"] == populated.image_bytes

    only = _json(invoke("show", "alpha", "--url", populated.url, "--json", "--agent", "main").stdout)
    assert [d["agent_id"] for d in only] == ["main"]
    table = invoke("show", "alpha", "--url", populated.url, "--agent", "main")
    assert table.exit_code == 0
    assert "pinned" in table.stdout
    assert "[turn 1] Remember: the launch date is 3 March." in table.stdout  # content is not markup


def test_history_marks_evicted_entries(invoke: Invoke, populated: Populated) -> None:
    result = invoke("history", "alpha", "--url", populated.url, "--json", "--agent", "main")
    assert result.exit_code == 0, result.stderr
    rows = _json(result.stdout)
    assert isinstance(rows, list)
    with Ledger.connect(populated.url) as ledger:
        history = ledger.history("alpha", "main")
    messages = [r for r in rows if r["kind"] == "message"]
    assert [r["message"]["message_id"] for r in messages] == [h.message.message_id for h in history]
    evicted = [r for r in messages if r["status"] == "evicted"]
    assert evicted, "the populated ledger has evictions"
    assert all(r["evicted_by"] for r in evicted)
    assert len(messages) > len([r for r in messages if r["status"] == "active"])
    table = invoke("history", "alpha", "--url", populated.url)
    assert table.exit_code == 0
    assert "evicted by" in table.stdout
    assert "summary" in table.stdout
    assert "superseded by" in table.stdout


def test_evictions_with_filters(invoke: Invoke, populated: Populated) -> None:
    everything = _json(invoke("evictions", "alpha", "--url", populated.url, "--json").stdout)
    assert isinstance(everything, list)
    with Ledger.connect(populated.url) as ledger:
        expected = ledger.evictions("alpha")
    assert sorted(e["entry_id"] for e in everything) == sorted(e.entry_id for e in expected)
    triggers = {e["trigger"] for e in everything}
    assert {"manual", "reactive", "proactive"} <= triggers
    reactive = _json(invoke("evictions", "alpha", "--url", populated.url, "--json", "--trigger", "reactive").stdout)
    assert isinstance(reactive, list)
    assert reactive
    assert {e["trigger"] for e in reactive} == {"reactive"}
    assert all(e["error"] and "too long" in e["error"] for e in reactive)
    assert len(reactive) == len([e for e in expected if e.trigger == "reactive"])
    summarized = [e for e in everything if e["agent_id"] == "helper"]
    assert summarized
    assert all(e["replaced_by_summary"] for e in summarized)

    recent = _json(invoke("evictions", "alpha", "--url", populated.url, "--json", "--since", "1h").stdout)
    assert len(recent) == len(everything)
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    none = _json(invoke("evictions", "alpha", "--url", populated.url, "--json", "--since", future).stdout)
    assert none == []
    table = invoke("evictions", "alpha", "--url", populated.url, "--agent", "main", "--trigger", "reactive")
    assert table.exit_code == 0
    assert "reactive" in table.stdout
    assert "sliding_window" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday-ish"], "neither an ISO-8601 time"),
        (["--trigger", "sometimes"], "sometimes"),
    ],
)
def test_evictions_bad_filters_are_usage_errors(
    invoke: Invoke, populated: Populated, args: list[str], message: str
) -> None:
    result = invoke("evictions", "alpha", "--url", populated.url, *args)
    assert result.exit_code == ExitCode.USAGE
    error = " ".join(result.stderr.replace("│", " ").split())
    assert message in error
    assert f"Invalid value for '{args[0]}': " in error  # the option is named ...
    assert "Value error" not in error  # ... and the validator's own prefix is not shown


@pytest.mark.parametrize(
    "args",
    [
        ["history", "alpha", "--limit", "0"],
        ["history", "alpha", "--last", "x"],
        ["show", "alpha", "--at-call", "0"],
        ["sessions", "--offset", "-1"],
        ["prune", "--older-than", "yesterday"],
    ],
)
def test_usage_errors_name_the_option(invoke: Invoke, populated: Populated, args: list[str]) -> None:
    result = invoke(*args, "--url", populated.url)
    assert result.exit_code == ExitCode.USAGE
    error = " ".join(result.stderr.replace("│", " ").split())
    option = next(a for a in args if a.startswith("--"))
    assert f"Invalid value for '{option}'" in error, error
    assert "Value error" not in error


def test_summaries_and_supersession(invoke: Invoke, populated: Populated) -> None:
    rows = _json(invoke("summaries", "alpha", "--url", populated.url, "--json").stdout)
    assert isinstance(rows, list)
    with Ledger.connect(populated.url) as ledger:
        expected = ledger.summaries("alpha")
    assert [r["summary_id"] for r in rows] == [s.summary_id for s in expected]
    assert len(rows) == 2
    older, newer = rows
    assert older["superseded_by"] == newer["summary_id"]
    assert newer["supersedes"] == older["summary_id"]
    assert older["summary_id"] in newer["replaces"]
    table = invoke("summaries", "alpha", "--url", populated.url)
    assert "extractive" in table.stdout
    assert "superseded by" in table.stdout


def test_reductions_in_commit_order(invoke: Invoke, populated: Populated) -> None:
    rows = _json(invoke("reductions", "alpha", "--url", populated.url, "--json", "--agent", "main").stdout)
    assert isinstance(rows, list)
    with Ledger.connect(populated.url) as ledger:
        expected = ledger.reductions("alpha", "main")
    assert [r["reduction_id"] for r in rows] == [r.reduction_id for r in expected]
    assert [r["trigger"] for r in rows] == ["manual", "reactive", "reactive"]
    assert rows[1]["revised"]
    table = invoke("reductions", "alpha", "--url", populated.url)
    assert table.exit_code == 0
    assert "reactive" in table.stdout
    assert "ContextWindowOverflowError" in table.stdout


def test_export_is_json_lines_of_everything(invoke: Invoke, populated: Populated, tmp_path: Path) -> None:
    result = invoke("export", "alpha", "--url", populated.url)
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    with Ledger.connect(populated.url) as ledger:
        expected = {
            "conversation": 2,
            "message": sum(len(ledger.history("alpha", a)) for a in ("main", "helper")),
            "summary": len(ledger.summaries("alpha")),
            "reduction": len(ledger.reductions("alpha")),
            "revision": sum(len(ledger.revisions("alpha", a)) for a in ("main", "helper")),
        }
    counts = {kind: sum(r["type"] == kind for r in records) for kind in expected}
    assert counts == expected
    assert expected["revision"] > 0  # the reactive reduction truncated tool results
    image = next(r for r in records if r["type"] == "message" and r["message"]["message_id"] == populated.image_id)
    assert Message.from_record(image["message"]).content[1]["image"]["source"]["bytes"] == populated.image_bytes

    out = tmp_path / "alpha.jsonl"
    written = invoke("export", "alpha", "--url", populated.url, "--agent", "helper", "-o", str(out))
    assert written.exit_code == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines
    assert all(json.loads(line)["agent_id"] == "helper" for line in lines)
    assert f"to {out}" in written.stderr
    unwritable = invoke("export", "alpha", "--url", populated.url, "-o", str(tmp_path / "missing-dir" / "x.jsonl"))
    assert unwritable.exit_code == ExitCode.ERROR
    assert unwritable.stderr.startswith("error: cannot write")


def test_delete_asks_first(invoke: Invoke, populated: Populated) -> None:
    declined = invoke("delete", "beta", "--url", populated.url, input="n\n")
    assert declined.exit_code == ExitCode.ERROR
    assert "not deleted" in declined.stderr
    closed = invoke("delete", "beta", "--url", populated.url, input="")
    assert closed.exit_code == ExitCode.ERROR
    with Ledger.connect(populated.url) as ledger:
        assert ledger.agents("beta") == ["solo"]
    accepted = invoke("delete", "beta", "--url", populated.url, input="y\n")
    assert accepted.exit_code == 0, accepted.stderr
    assert "deleted session beta" in accepted.stdout
    with Ledger.connect(populated.url) as ledger:
        assert ledger.agents("beta") == []
        assert ledger.agents("alpha") == ["helper", "main"]
    forced = invoke("delete", "alpha", "--url", populated.url, "--yes")
    assert forced.exit_code == 0
    with Ledger.connect(populated.url) as ledger:
        assert ledger.agents("alpha") == []
        assert ledger.evictions("alpha") == []
        assert ledger.summaries("alpha") == []


@pytest.mark.parametrize("command", ["show", "history", "evictions", "summaries", "reductions", "export", "delete"])
def test_missing_session_is_not_found(invoke: Invoke, populated: Populated, command: str) -> None:
    args = [command, "no-such-session", "--url", populated.url] + (["--yes"] if command == "delete" else [])
    result = invoke(*args)
    assert result.exit_code == ExitCode.NOT_FOUND
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: ")
    assert "no-such-session" in result.stderr
    assert result.stdout == ""


def test_missing_agent_is_not_found(invoke: Invoke, populated: Populated) -> None:
    result = invoke("show", "alpha", "--url", populated.url, "--agent", "ghost")
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "ghost" in result.stderr
    assert "helper, main" in result.stderr


def test_trigger_choices_match_the_model() -> None:
    from typing import get_args

    assert [t.value for t in TriggerName] == list(get_args(Trigger))


def test_parse_since() -> None:
    now = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)
    assert parse_since("15m", now=now) == now - timedelta(minutes=15)
    assert parse_since("2h", now=now) == now - timedelta(hours=2)
    assert parse_since("1w", now=now) == now - timedelta(weeks=1)
    assert parse_since("2025-01-30T08:00:00Z") == datetime(2025, 1, 30, 8, tzinfo=UTC)
    assert parse_since("2025-01-30") == datetime(2025, 1, 30, tzinfo=UTC)
    assert parse_since(None) is None


def test_verbose_logs_structured_lines(invoke: Invoke, populated: Populated) -> None:
    from contextledger.cli.app import _configure_logging

    try:
        result = invoke("-v", "delete", "beta", "--url", populated.url, "--yes")
    finally:
        _configure_logging(0)
    assert result.exit_code == 0
    assert "session_id=<beta>, deleted=<True> | delete_session" in result.stderr
    quiet = invoke("sessions", "--url", populated.url)
    assert "INFO" not in quiet.stderr
