"""``contextledger import adk``: sessions an ADK ``DatabaseSessionService`` wrote, read into the ledger."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events import Event
from google.adk.sessions import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types

from contextledger import Ledger, Message
from contextledger.integrations.adk import CallTool, LedgerSessionService, ScriptedLlm, Step, ledger_session_id
from tests.adk.scenarios import APP, build, say
from tests.cli.conftest import Invoke

pytestmark = pytest.mark.filterwarnings("ignore:.*EXPERIMENTAL.*:UserWarning")


async def _adk_sessions(db_url: str) -> None:
    """Sessions written by ADK's own service through a real Runner: tools, state, a compaction."""
    source = DatabaseSessionService(db_url)
    try:
        summarizer = ScriptedLlm(script=["SUMMARY OF TWO TURNS"])
        compaction = EventsCompactionConfig(
            compaction_interval=2, overlap_size=0, summarizer=LlmEventSummarizer(llm=summarizer)
        )
        script: list[Step] = [CallTool("remember", {"fact": "likes trains"}), "Noted.", "Sure.", "Bye."]
        runner, _ = build(source, script, compaction=compaction)
        first = await source.create_session(app_name=APP, user_id="ada", state={"tier": "gold"})
        for text in ("Remember trains.", "Thanks", "Bye"):
            await say(runner, first.id, text, user="ada")
        await source.create_session(app_name=APP, user_id="bob", session_id="empty", state={"user:lang": "de"})
        other = await source.create_session(app_name="other-app", user_id="ada", session_id="o1")
        await source.append_event(
            other, Event(author="user", content=types.Content(role="user", parts=[types.Part(text="hi")]))
        )
    finally:
        await source.close()


def _sessions(service: BaseSessionService, app: str) -> dict[str, tuple[dict[str, Any], list[Event]]]:
    async def read() -> dict[str, tuple[dict[str, Any], list[Event]]]:
        out = {}
        for listed in (await service.list_sessions(app_name=app)).sessions:
            got = await service.get_session(app_name=app, user_id=listed.user_id, session_id=listed.id)
            assert got is not None
            out[f"{listed.user_id}/{listed.id}"] = (got.state, got.events)
        return out

    return asyncio.run(read())


def test_import_adk_reads_every_session_as_adk_wrote_it(invoke: Invoke, tmp_path: Path, sqlite_url: str) -> None:
    db = tmp_path / "adk.db"
    asyncio.run(_adk_sessions(f"sqlite+aiosqlite:///{db}"))

    result = invoke("import", "adk", f"sqlite:///{db}", "--url", sqlite_url, "--json")
    assert result.exit_code == 0, result.stderr
    outcomes = {
        s["ledger_session_id"]: (s["outcome"], s["events"], s["compactions"]) for s in json.loads(result.stdout)
    }
    assert set(outcomes.values()) >= {("imported", 0, 0), ("imported", 1, 0)}
    assert [v for k, v in outcomes.items() if k.startswith("travel/ada/")][0][2] == 1  # noqa: RUF015

    with Ledger.connect(sqlite_url) as ledger:
        ours = LedgerSessionService(ledger=ledger)
        theirs = DatabaseSessionService(f"sqlite+aiosqlite:///{db}")
        for app in (APP, "other-app"):
            assert _sessions(ours, app) == _sessions(theirs, app)
        asyncio.run(theirs.close())
        key = next(k for k in outcomes if k.startswith("travel/ada/"))
        (reduction,) = ledger.reductions(key)
        assert reduction.strategy == "adk_compaction"
        assert [s.content for s in ledger.summaries(key)] == ["SUMMARY OF TWO TURNS"]
        assert ledger.user_state(APP, "ada") == {"fact": "likes trains"}
        assert ledger.user_state(APP, "bob") == {"lang": "de"}
        assert ledger.app_state(APP) == {"remembered": 1}
        assert {i.session_id for i in ledger.sessions(app=APP, user="ada")} == {key}

    again = invoke("import", "adk", f"sqlite:///{db}", "--url", sqlite_url, "--json")
    assert again.exit_code == 0, again.stderr
    assert {s["outcome"] for s in json.loads(again.stdout)} == {"unchanged"}


def test_a_session_that_grew_is_completed_and_another_one_left_alone(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "adk.db"
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"

    async def grow(texts: list[str]) -> None:
        source = DatabaseSessionService(f"sqlite+aiosqlite:///{db}")
        try:
            session = await source.get_session(app_name=APP, user_id="ada", session_id="s1")
            if session is None:
                session = await source.create_session(app_name=APP, user_id="ada", session_id="s1")
            for text in texts:
                event = Event(author="user", content=types.Content(role="user", parts=[types.Part(text=text)]))
                await source.append_event(session, event)
        finally:
            await source.close()

    asyncio.run(grow(["one", "two"]))
    assert invoke("import", "adk", f"sqlite:///{db}", "--url", ledger_url).exit_code == 0
    asyncio.run(grow(["three"]))
    with Ledger.connect(ledger_url) as ledger:  # another session holds other events under the id
        clash = ledger.conversation(ledger_session_id(APP, "bob", "s2"), app=APP, user="bob")
        clash.append(Message.user("not from ADK"))
    asyncio.run(_bob(db))
    result = invoke("import", "adk", f"sqlite:///{db}", "--url", ledger_url, "--json", "--app", APP)
    assert result.exit_code == 0, result.stderr
    assert {s["ledger_session_id"]: s["outcome"] for s in json.loads(result.stdout)} == {
        "travel/ada/s1": "imported",
        "travel/bob/s2": "skipped",
    }
    with Ledger.connect(ledger_url) as ledger:
        assert [h.message.plain_text for h in ledger.history("travel/ada/s1")] == ["one", "two", "three"]
        assert [h.message.plain_text for h in ledger.history("travel/bob/s2")] == ["not from ADK"]


async def _bob(db: Path) -> None:
    source = DatabaseSessionService(f"sqlite+aiosqlite:///{db}")
    try:
        session = await source.create_session(app_name=APP, user_id="bob", session_id="s2")
        await source.append_event(session, Event(author="user"))
    finally:
        await source.close()


def test_a_large_import_shows_its_progress(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "adk.db"

    async def many() -> None:
        source = DatabaseSessionService(f"sqlite+aiosqlite:///{db}")
        try:
            session = await source.create_session(app_name=APP, user_id="ada", session_id="long")
            for n in range(520):
                await source.append_event(session, Event(author="user", timestamp=float(n + 1)))
        finally:
            await source.close()

    asyncio.run(many())
    result = invoke("import", "adk", f"sqlite:///{db}", "--url", f"sqlite:///{tmp_path / 'ledger.db'}")
    assert result.exit_code == 0, result.stderr
    assert "importing" in result.stderr
    assert "520/520" in result.stderr
    assert "1 imported" in result.stdout
    with Ledger.connect(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        assert len(ledger.history("travel/ada/long")) == 520
        assert len(ledger.reductions("travel/ada/long")) == 0


def test_a_database_without_adk_sessions_is_refused_untouched(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    result = invoke("import", "adk", f"sqlite:///{db}", "--url", f"sqlite:///{tmp_path / 'ledger.db'}")
    assert result.exit_code != 0
    assert "holds no ADK DatabaseSessionService sessions" in result.stderr
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]
    conn.close()
