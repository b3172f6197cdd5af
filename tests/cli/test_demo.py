"""``contextledger demo`` end to end, checked against what the ledger holds afterwards."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger
from contextledger.cli import ExitCode
from contextledger.demo.scenarios import SCENARIOS

from .conftest import Invoke

TURNS = 10


def _run_json(invoke: Invoke, *args: str) -> dict[str, Any]:
    result = invoke("demo", "--json", *args)
    assert result.exit_code == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_demo_report_matches_the_ledger(invoke: Invoke, ledger_url: str) -> None:
    report = _run_json(invoke, "--url", ledger_url, "--turns", str(TURNS))
    assert report["ok"] is True
    assert all(c["ok"] for c in report["checks"])
    sessions = report["sessions"]
    assert [s["scenario"] for s in sessions] == [s.name for s in SCENARIOS]
    triggers: Counter[str] = Counter()
    with Ledger.connect(ledger_url) as ledger:
        for s in sessions:
            sid, agent = s["session_id"], s["agent_id"]
            snapshot = ledger.store.load(sid, agent)
            assert snapshot is not None
            # The report's final view and counters are what the database holds.
            assert [e["entry_id"] for e in s["final"]["entries"]] == [e.entry_id for e in snapshot.entries]
            assert s["final"]["model_call_count"] == snapshot.state.model_call_count
            assert snapshot.state.model_call_count >= TURNS * 2  # a tool call and an answer per turn
            assert snapshot.state.agent_state == {"scenario": s["scenario"], "turns_done": TURNS}
            # The restore brought back exactly the view and count before the stop.
            assert s["restored"]["identical"] is True
            assert s["restored"]["model_call_count"] == s["restored"]["model_call_count_before_stop"]
            assert s["restored"]["model_call_count"] > 0
            assert s["restored"]["entries"]
            # The eviction history shown is the eviction history stored.
            stored = ledger.evictions(sid, agent)
            assert [e["entry_id"] for e in s["evictions"]] == [e.entry_id for e in stored]
            assert [m["summary_id"] for m in s["summaries"]] == [m.summary_id for m in ledger.summaries(sid, agent)]
            # Nothing is lost: every evicted entry is still in the history.
            history = {h.message.message_id: h for h in ledger.history(sid, agent)}
            for eviction in stored:
                if eviction.kind == "message":
                    assert history[eviction.entry_id].status == "evicted"
                    assert not history[eviction.entry_id].pinned
            triggers.update(r.trigger for r in ledger.reductions(sid, agent))
    by_name = {s["scenario"]: s for s in sessions}
    # Each policy really ran: per-turn trimming, proactive summaries, a reactive overflow, a crash repair.
    assert triggers["per_turn"] > 0
    assert triggers["proactive"] > 0
    assert triggers["reactive"] > 0
    assert triggers["restore"] == 1
    assert triggers["end_of_invocation"] > 0
    assert by_name["triage"]["overflows"] > 0
    assert by_name["triage"]["restored"]["repair"]["strategy"] == "tool_pair_repair"
    assert by_name["support"]["summaries"]
    assert all(e["replaced_by_summary"] for e in by_name["support"]["evictions"] if e["kind"] == "message")
    trip = by_name["trip"]
    pinned = [e for e in trip["final"]["entries"] if e["pinned"]]
    assert any("[turn 1]" in json.dumps(e["message"]) for e in pinned), "the pinned constraints survived"
    assert len(pinned) >= 2, "the pin tool pinned a tool result too"


def test_demo_tables_show_restore_and_evictions(invoke: Invoke, sqlite_url: str) -> None:
    result = invoke("demo", "--url", sqlite_url, "--turns", "6", "--sessions", "4")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for scenario in SCENARIOS:
        assert "Restored context of demo-" in out
        assert scenario.agent_id in out
    assert "restored 4 session(s) from the database alone" in " ".join(out.split())
    assert out.count("Eviction history of demo-") == 4
    assert "interrupted tool call answered" in out
    assert "✓ restored view identical" in out
    assert "✗" not in out
    assert "model_call_count" in out
    assert "Summaries" in out
    assert "extractive" in out
    assert "24/24" in result.stderr  # the progress bar (4 sessions x 6 turns) goes to stderr
    # The printed next steps work on the demo's ledger.
    sessions = json.loads(invoke("sessions", "--url", sqlite_url, "--json").stdout)
    assert {s["session_id"] for s in sessions} == {f"demo-{i + 1}-{s.name}" for i, s in enumerate(SCENARIOS)}
    per_turn = json.loads(
        invoke("evictions", "demo-1-trip", "--url", sqlite_url, "--trigger", "per_turn", "--json").stdout
    )
    assert per_turn
    assert {e["trigger"] for e in per_turn} == {"per_turn"}
    reductions = json.loads(invoke("reductions", "demo-3-triage", "--url", sqlite_url, "--json").stdout)
    assert "reactive" in {r["trigger"] for r in reductions}


def test_demo_default_url_is_fresh_each_run_unless_keep(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = _run_json(invoke, "--turns", "2", "--sessions", "2")
    assert first["url"].endswith("contextledger-demo.db")
    assert (tmp_path / "contextledger-demo.db").is_file()
    _run_json(invoke, "--turns", "2", "--sessions", "2")
    url = "sqlite:///contextledger-demo.db"
    with Ledger.connect(url) as ledger:
        assert len(ledger.sessions()) == 2
    kept = _run_json(invoke, "--turns", "2", "--sessions", "3", "--keep")
    new_ids = {s["session_id"] for s in kept["sessions"]}
    assert len(new_ids) == 3
    assert all(sid.startswith("demo-") and sid.count("-") == 3 for sid in new_ids)
    with Ledger.connect(url) as ledger:
        assert len(ledger.sessions()) == 5


def test_more_sessions_than_scenarios(invoke: Invoke, sqlite_url: str) -> None:
    report = _run_json(invoke, "--url", sqlite_url, "--turns", "4", "--sessions", "6")
    assert report["ok"]
    assert len(report["sessions"]) == 6
    assert len({s["session_id"] for s in report["sessions"]}) == 6


def test_demo_refuses_memory(invoke: Invoke) -> None:
    result = invoke("demo", "--url", "memory://")
    assert result.exit_code == ExitCode.CONFIG
    assert "survive a restart" in result.stderr


@pytest.mark.parametrize("args", [["--turns", "1"], ["--sessions", "0"], ["--sessions", "13"]])
def test_demo_bad_options(invoke: Invoke, args: list[str]) -> None:
    assert invoke("demo", *args).exit_code == ExitCode.USAGE


def test_demo_sets_up_a_fresh_postgres_database(invoke: Invoke, postgres_empty_url: str) -> None:
    report = _run_json(invoke, "--url", postgres_empty_url, "--turns", "4", "--sessions", "4")
    assert report["ok"]
    current = json.loads(invoke("db", "current", "--url", postgres_empty_url, "--json").stdout)
    assert current["up_to_date"] is True


def test_demo_unreachable_server_fails_before_running(invoke: Invoke) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = invoke("demo", "--url", f"redis://127.0.0.1:{port}/0")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1


def test_the_closing_hints_run_as_printed(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("demo", "--url", f"sqlite:///{tmp_path / 'demo.db'}", "--turns", "2", "--sessions", "1")
    assert result.exit_code == 0, result.stderr
    hints = [shlex.split(line) for line in result.stdout.splitlines() if line.startswith("  contextledger ")]
    assert [words[1] for words in hints] == ["sessions", "show", "evictions", "history", "serve", "timeline"]
    assert "pip install 'contextledger[web]'" in result.stdout
    for words in hints:
        if words[1] == "serve":  # it serves until stopped (tests/web start it); its options are real
            assert invoke("serve", "--help").exit_code == 0
            continue
        assert invoke(*words[1:]).exit_code == 0, words
    assert "<html" in (tmp_path / "demo-1-trip.html").read_text(encoding="utf-8")
