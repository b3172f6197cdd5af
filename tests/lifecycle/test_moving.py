"""Moving a ledger: ``export`` -> ``import`` -> ``export`` is byte-identical, and ``copy`` across backends."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.cli import ExitCode
from contextledger.errors import ConversationExists, InvalidExport
from contextledger.history.transfer import LINE_TYPES, dump_lines, records_from_lines
from contextledger.managers import SlidingWindowConversationManager
from contextledger.stores.capabilities import complete
from contextledger.testing.transfer import rich_conversation
from tests.cli.conftest import Invoke


def _fill(url: str, session: str) -> None:
    """A rich conversation, a second agent, and a fork of the session."""
    with Ledger.connect(url) as ledger:
        rich_conversation(complete(ledger.store, "tests"), session, "main")
        helper = ledger.conversation(session, "helper", manager=SlidingWindowConversationManager(window_size=2))
        for turn in range(4):
            helper.append(Message.user(f"q{turn}"))
            helper.before_model_call()
            helper.append(Message.assistant(f"a{turn}"))
        ledger.fork(session, f"{session}-fork", at_call=2, agent_id="main")


def _export(invoke: Invoke, url: str, session: str) -> str:
    result = invoke("export", session, "--url", url)
    assert result.exit_code == 0, result.stderr
    assert result.stdout
    return result.stdout


def test_export_import_export_is_byte_identical(invoke: Invoke, sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url, "s")
    first = _export(invoke, sqlite_url, "s")
    kinds = {json.loads(line)["type"] for line in first.splitlines()}
    assert kinds == set(LINE_TYPES)
    dump = tmp_path / "s.jsonl"
    dump.write_text(first, encoding="utf-8")
    target = f"sqlite:///{tmp_path / 'target.db'}"
    loaded = invoke("import", str(dump), "--url", target)
    assert loaded.exit_code == 0, loaded.stderr
    assert "2 imported, 0 unchanged" in loaded.stdout
    assert _export(invoke, target, "s") == first
    again = invoke("import", str(dump), "--url", target, "--json")
    assert again.exit_code == 0, again.stderr
    assert [d["outcome"] for d in json.loads(again.stdout)] == ["unchanged", "unchanged"]
    assert _export(invoke, target, "s") == first
    # the fork's origin moves with it
    fork = _export(invoke, sqlite_url, "s-fork")
    assert invoke("import", "-", "--url", target, input=fork).exit_code == 0
    with Ledger.connect(target) as ledger:
        origin = ledger.fork_origin("s-fork", "main")
        assert origin is not None
        assert (origin.session_id, origin.at_call) == ("s", 2)


def test_an_imported_conversation_restores_the_same_view(invoke: Invoke, sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url, "s")
    dump = tmp_path / "s.jsonl"
    dump.write_text(_export(invoke, sqlite_url, "s"), encoding="utf-8")
    target = f"sqlite:///{tmp_path / 'target.db'}"
    assert invoke("import", "file", str(dump), "--url", target).exit_code == 0
    with Ledger.connect(sqlite_url) as a, Ledger.connect(target) as b:
        for agent in ("main", "helper"):
            assert a.conversation("s", agent).messages == b.conversation("s", agent).messages
            count = a.conversation("s", agent).model_call_count
            assert count == b.conversation("s", agent).model_call_count
            for call in range(1, count + 1):
                assert list(a.view_at("s", agent, model_call=call)) == list(b.view_at("s", agent, model_call=call))


def test_import_refuses_different_content_before_writing_anything(
    invoke: Invoke, sqlite_url: str, tmp_path: Path
) -> None:
    _fill(sqlite_url, "s")
    text = _export(invoke, sqlite_url, "s")
    target = f"sqlite:///{tmp_path / 'target.db'}"
    # the target holds s/main with one record changed; s/helper is not there yet
    conversations = records_from_lines(text.splitlines())
    main = next(c for c in conversations if c.agent_id == "main")
    changed = main.model_copy(update={"state": main.state.model_copy(update={"model_call_count": 42})})
    with Ledger.connect(target) as ledger:
        assert ledger.import_records(changed) == "imported"
        with pytest.raises(ConversationExists):
            ledger.import_records(main)
    dump = tmp_path / "s.jsonl"
    dump.write_text(text, encoding="utf-8")
    refused = invoke("import", str(dump), "--url", target)
    assert refused.exit_code == ExitCode.ERROR
    assert "different records" in refused.stderr
    with Ledger.connect(target) as ledger:
        assert ledger.agents("s") == ["main"]  # helper was not written either
        assert ledger.conversation("s", "main").model_call_count == 42


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda lines: [*lines, "{not json"], "not JSON"),
        (lambda lines: [*lines, '{"type": "gossip"}'], "unknown record type"),
        (lambda lines: [line for line in lines if '"type":"conversation"' not in line], "no conversation line"),
        (lambda lines: [lines[0].replace('"version":', '"version":"x", "v":'), *lines[1:]], "invalid conversation"),
        (lambda lines: [*lines, lines[0]], "appears twice"),
    ],
)
def test_a_bad_export_is_refused_with_its_line(
    invoke: Invoke, sqlite_url: str, tmp_path: Path, mangle: object, message: str
) -> None:
    _fill(sqlite_url, "s")
    lines = _export(invoke, sqlite_url, "s").splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(mangle(lines)) + "\n", encoding="utf-8")  # type: ignore[operator]
    target = f"sqlite:///{tmp_path / 'target.db'}"
    result = invoke("import", str(bad), "--url", target)
    assert result.exit_code == ExitCode.ERROR
    assert message in result.stderr
    assert result.stderr.count("\n") == 1
    with pytest.raises(InvalidExport):
        records_from_lines(mangle(lines))  # type: ignore[operator]
    missing = invoke("import", str(tmp_path / "missing.jsonl"), "--url", target)
    assert missing.exit_code == ExitCode.ERROR
    assert "cannot read" in missing.stderr


def test_copy_round_trip_sqlite_postgres_redis_sqlite(
    invoke: Invoke, sqlite_url: str, postgres_ledger_url: str, redis_url: str, tmp_path: Path
) -> None:
    session = f"move-{uuid.uuid4().hex[:8]}"
    _fill(sqlite_url, session)
    first = {s: _export(invoke, sqlite_url, s) for s in (session, f"{session}-fork")}
    back = f"sqlite:///{tmp_path / 'back.db'}"
    hops = [(sqlite_url, postgres_ledger_url), (postgres_ledger_url, redis_url), (redis_url, back)]
    try:
        for source, target in hops:
            sessions = [] if source != redis_url else ["--session", session, "--session", f"{session}-fork"]
            copied = invoke("copy", "--from", source, "--to", target, *sessions, "--json")
            assert copied.exit_code == 0, copied.stderr
            assert {d["outcome"] for d in json.loads(copied.stdout)} == {"imported"}
            for s, text in first.items():
                assert _export(invoke, target, s) == text, f"{s} changed on the way to {target}"
        # idempotent: a second copy changes nothing
        again = invoke("copy", "--from", redis_url, "--to", back, "--session", session)
        assert again.exit_code == 0, again.stderr
        assert "0 copied, 2 unchanged" in again.stdout
        assert _export(invoke, back, session) == first[session]
    finally:
        with Ledger.connect(redis_url) as ledger:
            ledger.delete_session(session)
            ledger.delete_session(f"{session}-fork")


def test_copy_one_session_with_a_progress_bar(invoke: Invoke, sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url, "s")
    target = f"sqlite:///{tmp_path / 'target.db'}"
    result = invoke("copy", "--from", sqlite_url, "--to", target, "--session", "s", "--progress")
    assert result.exit_code == 0, result.stderr
    assert "copying" in result.stderr
    assert "2/2" in result.stderr
    assert "2 copied, 0 unchanged" in result.stdout
    with Ledger.connect(target) as ledger:
        assert [i.session_id for i in ledger.sessions()] == ["s"]
    quiet = invoke("copy", "--from", sqlite_url, "--to", target)
    assert quiet.exit_code == 0
    assert quiet.stderr == ""  # not a terminal: no bar
    assert "1 copied, 2 unchanged" in quiet.stdout
    missing = invoke("copy", "--from", sqlite_url, "--to", target, "--session", "nope")
    assert missing.exit_code == ExitCode.NOT_FOUND
    same = invoke("copy", "--from", target, "--to", target)
    assert same.exit_code == ExitCode.CONFIG


def test_the_library_moves_what_the_cli_moves(sqlite_url: str, tmp_path: Path) -> None:
    _fill(sqlite_url, "s")
    target = f"sqlite:///{tmp_path / 'target.db'}"
    with Ledger.connect(sqlite_url) as source, Ledger.connect(target) as dest:
        report = source.copy_to(dest, ["s"])
        assert report.count("imported") == 2
        assert dump_lines(dest.export_records("s")) == dump_lines(source.export_records("s"))
        assert source.copy_to(dest.store).count("unchanged") == 2  # the fork session is new


def test_the_async_api_moves_the_same_records(sqlite_url: str, tmp_path: Path) -> None:
    import asyncio

    from contextledger.aio import AsyncLedger

    _fill(sqlite_url, "s")
    target = f"sqlite:///{tmp_path / 'target.db'}"

    async def move() -> tuple[str, str, list[Any]]:
        async with await AsyncLedger.connect(sqlite_url) as source, await AsyncLedger.connect(target) as dest:
            report = await source.copy_to(dest, ["s"])
            assert report.count("imported") == 2
            records = await source.export_records("s")
            outcomes = [await dest.import_records(r) for r in records]
            return dump_lines(records), dump_lines(await dest.export_records("s")), outcomes

    exported, copied, outcomes = asyncio.run(move())
    assert copied == exported
    assert outcomes == ["unchanged", "unchanged"]
    with Ledger.connect(sqlite_url) as ledger:
        assert dump_lines(ledger.export_records("s")) == exported
