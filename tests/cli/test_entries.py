"""``message`` / ``show --entry`` (one entry whole), ``revisions``, and ``--limit`` / ``--last``."""

from __future__ import annotations

import json

import pytest

from contextledger import Ledger
from contextledger.cli import ExitCode
from contextledger.model.ids import is_time_ordered
from contextledger.model.text import short

from .conftest import Invoke, Populated


def test_message_prints_one_entry_whole(invoke: Invoke, populated: Populated) -> None:
    result = invoke("message", populated.image_id, "--url", populated.url)
    assert result.exit_code == 0, result.stderr
    assert populated.image_id in result.stdout
    assert "a screenshot" in result.stdout
    assert f"[image png, {len(populated.image_bytes)} bytes]" in result.stdout
    assert "pinned" in result.stdout
    same = invoke("show", "alpha", "--entry", populated.image_id, "--url", populated.url)
    assert same.stdout == result.stdout
    document = json.loads(invoke("message", populated.image_id, "--url", populated.url, "--json").stdout)
    assert document["message"]["message_id"] == populated.image_id
    assert document["kind"] == "message"


def test_message_shows_tool_calls_originals_and_why_it_left(invoke: Invoke, populated: Populated) -> None:
    with Ledger.connect(populated.url) as ledger:
        revisions = ledger.revisions("alpha", "main")
        history = {h.message.message_id: h for h in ledger.history("alpha", "main")}
    revised = revisions[0]
    result = invoke("message", revised.message_id, "--session", "alpha", "--url", populated.url)
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "[toolResult id=call-" in out
    assert f"original #{revised.number}" in out
    assert ("result line. " * 40).strip() in out  # the original is printed whole
    evicted = next(h for h in history.values() if h.status == "evicted" and h.message.tool_use_ids)
    gone = " ".join(invoke("message", evicted.message.message_id, "--url", populated.url).stdout.split())
    assert "[toolUse search id=" in gone
    assert '"q": "topic' in gone
    assert "evicted at model call" in gone
    assert "reduction" in gone


def test_message_by_unique_prefix_and_errors(invoke: Invoke, populated: Populated) -> None:
    # A library-made id starts with the time it was made (shared by the messages of that
    # moment): a start long enough to reach its random part finds it, and so does its end.
    prefix = invoke("message", populated.pinned_id[:24], "--url", populated.url)
    assert prefix.exit_code == 0, prefix.stderr
    assert "launch date is 3 March" in prefix.stdout
    end = invoke("message", populated.pinned_id[-8:], "--url", populated.url)
    assert end.exit_code == 0, end.stderr
    assert end.stdout == prefix.stdout
    missing = invoke("message", "no-such-entry", "--url", populated.url)
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "no entry" in missing.stderr
    with Ledger.connect(populated.url) as ledger:
        ids = [h.message.message_id for h in ledger.history("alpha", "main")]
    assert len(ids) > 16  # ids start with one of 16 hex digits: two of them share it
    common = next(i[:1] for i in ids if sum(j.startswith(i[:1]) for j in ids) > 1)
    ambiguous = invoke("message", common, "--session", "alpha", "--agent", "main", "--url", populated.url)
    assert ambiguous.exit_code == ExitCode.USAGE
    assert "ENTRY_ID" in ambiguous.stderr


def test_revisions_lists_every_rewrite(invoke: Invoke, populated: Populated) -> None:
    with Ledger.connect(populated.url) as ledger:
        expected = ledger.revisions("alpha", "main") + ledger.revisions("alpha", "helper")
    assert expected
    rows = json.loads(invoke("revisions", "alpha", "--url", populated.url, "--json").stdout)
    assert sorted((r["message_id"], r["number"]) for r in rows) == sorted((r.message_id, r.number) for r in expected)
    table = invoke("revisions", "alpha", "--url", populated.url)
    assert table.exit_code == 0
    assert "result line." in table.stdout
    empty = invoke("revisions", "beta", "--url", populated.url)
    assert "no revisions" in empty.stdout


def test_pins_lists_every_pin_change_with_who_asked(invoke: Invoke, populated: Populated) -> None:
    with Ledger.connect(populated.url) as ledger:
        conv = ledger.conversation("alpha", "main")
        conv.unpin(populated.image_id, source="model")
        expected = ledger.pin_history("alpha")
    assert [(e.entry_id, e.pinned, e.source) for e in expected][-3:] == [
        (populated.pinned_id, True, "api"),
        (populated.image_id, True, "api"),
        (populated.image_id, False, "model"),
    ]
    rows = json.loads(invoke("pins", "alpha", "--url", populated.url, "--json").stdout)
    assert [(r["entry_id"], r["pinned"], r["source"]) for r in rows] == [
        (e.entry_id, e.pinned, e.source) for e in expected
    ]
    for flag, expected_rows in (("--last", expected[-2:]), ("--limit", expected[:2])):
        cut = json.loads(invoke("pins", "alpha", flag, "2", "--url", populated.url, "--json").stdout)
        assert [(r["entry_id"], r["pinned"], r["position"]) for r in cut] == [
            (e.entry_id, e.pinned, e.position) for e in expected_rows
        ]
    listing = invoke("pins", "alpha", "--url", populated.url, env={"COLUMNS": "200"})
    assert listing.exit_code == 0
    assert "Remember: the launch date" in listing.stdout
    assert "unpin" in listing.stdout
    assert "model" in listing.stdout
    only_helper = invoke("pins", "alpha", "--agent", "helper", "--url", populated.url)
    assert "no pin changes" in only_helper.stdout
    missing = invoke("pins", "nope", "--url", populated.url)
    assert missing.exit_code == ExitCode.NOT_FOUND


@pytest.mark.parametrize("command", ["history", "evictions", "summaries", "reductions", "revisions", "pins", "show"])
def test_limit_and_last(invoke: Invoke, populated: Populated, command: str) -> None:
    def rows(*args: str) -> list[object]:
        result = invoke(
            command,
            "alpha",
            "--agent",
            "main" if command != "summaries" else "helper",
            "--url",
            populated.url,
            "--json",
            *args,
        )
        assert result.exit_code == 0, result.stderr
        document = json.loads(result.stdout)
        return document[0]["entries"] if command == "show" else document  # type: ignore[no-any-return]

    everything = rows()
    assert len(everything) >= 2, command
    assert rows("--limit", "1") == everything[:1]
    assert rows("--last", "2") == everything[-2:]
    assert rows("-n", "2", "--last", "1") == everything[1:2]


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)
def test_sessions_limit_and_last_agree(invoke: Invoke, populated: Populated) -> None:
    first = json.loads(invoke("sessions", "--url", populated.url, "--json", "--last", "1").stdout)
    assert first == json.loads(invoke("sessions", "--url", populated.url, "--json", "--limit", "1").stdout)
    assert len(first) == 1


@pytest.mark.parametrize(("args", "option"), [(["--limit", "0"], "--limit"), (["--last", "x"], "--last")])
def test_usage_errors_name_the_option(invoke: Invoke, args: list[str], option: str) -> None:
    result = invoke("history", "alpha", *args)
    assert result.exit_code == ExitCode.USAGE
    assert option in result.stderr


def test_history_tells_library_made_ids_apart_by_the_end_it_shows(invoke: Invoke, populated: Populated) -> None:
    with Ledger.connect(populated.url) as ledger:
        ids = [h.message.message_id for h in ledger.history("alpha", "main")]
    made = [i for i in ids if is_time_ordered(i)]
    assert len(made) > 4
    assert len({i[:8] for i in made}) < len(made)  # made within a minute: their starts are the time, shared
    shown = [short(i) for i in made]
    assert shown == [i[-8:] for i in made]
    assert len(set(shown)) == len(made)
    table = invoke("history", "alpha", "--agent", "main", "--url", populated.url, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.stderr
    assert all(end in table.stdout for end in shown)
    for end, full in zip(shown, made, strict=True):  # what the table shows finds the entry
        found = invoke("message", end, "--session", "alpha", "--url", populated.url, "--json")
        assert found.exit_code == 0, found.stderr
        assert json.loads(found.stdout)["message"]["message_id"] == full
