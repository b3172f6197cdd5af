"""What the ledger adds to ADK's session contract: apps and users in the ledger, compaction, sync methods, erasure."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.adk.events.event_actions import EventCompaction
from google.adk.sessions import Session
from google.genai import types

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.errors import ConfigurationError, ContextLedgerError, InvalidMessage, SessionOwnerConflict
from contextledger.history.lifecycle import ERASED_TEXT
from contextledger.integrations.adk import (
    AdkSessionExists,
    AdkStaleSession,
    LedgerSessionService,
    contents_of,
    ledger_session_id,
)

pytestmark = pytest.mark.anyio

APP, USER = "shop", "ada"


def _said(text: str, timestamp: float, role: str = "user") -> Event:
    author = "user" if role == "user" else "agent"
    return Event(author=author, content=types.Content(role=role, parts=[types.Part(text=text)]), timestamp=timestamp)


def _compaction(start: float, end: float, summary: str, timestamp: float) -> Event:
    compacted = types.Content(role="model", parts=[types.Part(text=summary)])
    return Event(
        author="user",
        timestamp=timestamp,
        actions=EventActions(
            compaction=EventCompaction(start_timestamp=start, end_timestamp=end, compacted_content=compacted)
        ),
    )


async def test_sessions_belong_to_their_app_and_user_in_the_ledger(ledger_url: tuple[str, dict[str, Any]]) -> None:
    url, options = ledger_url
    async with LedgerSessionService(url, **options) as service:
        await service.create_session(
            app_name=APP, user_id=USER, session_id="s1", state={"app:theme": "dark", "user:lang": "en"}
        )
        await service.create_session(app_name=APP, user_id="bob", session_id="s1")
        await service.create_session(app_name="bank", user_id=USER, session_id="s9")
        ledger = await service.ledger()
        assert [i.session_id for i in await ledger.sessions(app=APP, user=USER)] == ["shop/ada/s1"]
        assert sorted(i.session_id for i in await ledger.sessions(app=APP)) == ["shop/ada/s1", "shop/bob/s1"]
        assert sorted(i.session_id for i in await ledger.sessions(user=USER)) == ["bank/ada/s9", "shop/ada/s1"]
        assert await ledger.owner("shop/ada/s1") == (APP, USER)
        assert await ledger.app_state(APP) == {"theme": "dark"}
        assert await ledger.user_state(APP, USER) == {"lang": "en"}
        # The ledger session of an ADK session cannot be joined by another app's or user's writer.
        chat = await ledger.conversation("shop/ada/s1", "other", app=APP, user="bob")
        with pytest.raises(SessionOwnerConflict):
            await chat.append(Message.user("not mine"))


async def test_a_later_compaction_containing_an_earlier_one_supersedes_its_summary(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        session = await service.create_session(app_name=APP, user_id=USER)
        for n in range(1, 7):
            await service.append_event(session, _said(f"m{n}", float(n), "user" if n % 2 else "model"))
        await service.append_event(session, _compaction(3.0, 4.0, "SUMMARY 3-4", 7.0))
        await service.append_event(session, _said("m8", 8.0))
        await service.append_event(session, _compaction(1.0, 6.0, "SUMMARY 1-6", 9.0))
        ledger = await service.ledger()
        key = ledger_session_id(APP, USER, session.id)
        first, second = await ledger.summaries(key)
        assert (first.content, first.status, first.superseded_by) == ("SUMMARY 3-4", "evicted", second.summary_id)
        assert second.status == "active"
        assert first.summary_id in second.replaces
        conversation = await ledger.conversation(key)
        texts = [c.parts[0].text for c in contents_of(conversation.view) if c.parts]
        assert texts == ["SUMMARY 1-6", "m8"]
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert len(got.events) == 9  # ADK still gets every event back


async def test_a_compaction_keeps_pinned_entries_and_whole_tool_pairs(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        session = await service.create_session(app_name=APP, user_id=USER)
        call = Event(
            author="agent",
            timestamp=2.0,
            content=types.Content(
                role="model", parts=[types.Part(function_call=types.FunctionCall(id="c1", name="f", args={}))]
            ),
        )
        response = Event(
            author="agent",
            timestamp=5.0,
            content=types.Content(
                role="user",
                parts=[types.Part(function_response=types.FunctionResponse(id="c1", name="f", response={}))],
            ),
        )
        pinned = _said("keep me", 1.0)
        for event in (pinned, call, _said("m3", 3.0, "model"), _said("m4", 4.0), response, _said("m6", 6.0, "model")):
            await service.append_event(session, event)
        ledger = await service.ledger()
        key = ledger_session_id(APP, USER, session.id)
        await (await ledger.conversation(key)).pin(pinned.id)
        again = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert again is not None
        await service.append_event(again, _compaction(0.0, 3.0, "SUMMARY", 7.0))
        (summary,) = await ledger.summaries(key)
        assert pinned.id not in summary.replaces
        assert {call.id, response.id} <= set(summary.replaces)  # the response came with its call


async def test_the_sync_methods_on_a_sync_ledger(sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        service = LedgerSessionService(ledger=ledger)
        created = service.create_session_sync(app_name=APP, user_id=USER, session_id=" s1 ", state={"k": 1})
        assert created.id == "s1"
        assert service.get_session_sync(app_name=APP, user_id=USER, session_id="s1 ") == created
        assert [s.id for s in service.list_sessions_sync(app_name=APP).sessions] == ["s1"]
        with pytest.raises(AdkSessionExists):
            service.create_session_sync(app_name=APP, user_id=USER, session_id="s1")
        service.delete_session_sync(app_name=APP, user_id=USER, session_id=" s1")
        assert service.get_session_sync(app_name=APP, user_id=USER, session_id="s1") is None
        # The async methods work on the same service.
        got = await service.create_session(app_name=APP, user_id=USER, session_id="s2")
        assert await service.get_session(app_name=APP, user_id=USER, session_id="s2") == got


async def test_the_sync_and_async_methods_share_one_ledger_opened_from_a_url(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        created = service.create_session_sync(app_name=APP, user_id=USER, session_id="from-sync")
        assert await service.get_session(app_name=APP, user_id=USER, session_id="from-sync") == created
        await service.create_session(app_name=APP, user_id=USER, session_id="from-async")
        assert [s.id for s in service.list_sessions_sync(app_name=APP).sessions] == ["from-sync", "from-async"]
        await service.delete_session(app_name=APP, user_id=USER, session_id="from-async")
        await service.delete_session(app_name=APP, user_id=USER, session_id="from-sync")
    ledger = await AsyncLedger.connect(sqlite_url)
    try:
        given = LedgerSessionService(ledger=ledger)
        await given.create_session(app_name=APP, user_id=USER, session_id="s1")
        await given.close()  # a ledger given to the service stays open
        assert [i.session_id for i in await ledger.sessions()] == ["shop/ada/s1"]
    finally:
        await ledger.close()


async def test_padded_session_ids_read_and_delete(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        created = await service.create_session(app_name=APP, user_id=USER, session_id="  padded  ")
        assert created.id == "padded"
        assert await service.get_session(app_name=APP, user_id=USER, session_id=" padded ") == created
        await service.delete_session(app_name=APP, user_id=USER, session_id="padded  ")
        assert await service.get_session(app_name=APP, user_id=USER, session_id="padded") is None


async def test_erasing_a_user_erases_their_adk_sessions(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        mine = await service.create_session(
            app_name=APP, user_id=USER, state={"address": "12 Road", "user:email": "a@b.c"}
        )
        await service.append_event(mine, _said("my card is 4111", 1.0))
        other = await service.create_session(app_name=APP, user_id="bob")
        await service.append_event(other, _said("hello", 1.0))
        ledger = await service.ledger()
        report = await ledger.erase_user(APP, USER, reason="request 7")
        assert report.sessions == (ledger_session_id(APP, USER, mine.id),)
        # ADK no longer finds the user's sessions; the ledger keeps what is left: tombstones.
        assert await service.get_session(app_name=APP, user_id=USER, session_id=mine.id) is None
        assert (await service.list_sessions(app_name=APP, user_id=USER)).sessions == []
        assert await service.get_user_state(app_name=APP, user_id=USER) == {}
        key = ledger_session_id(APP, USER, mine.id)
        assert [h.message.plain_text for h in await ledger.history(key)] == [ERASED_TEXT]
        assert {t.reason for t in await ledger.tombstones(key)} == {"request 7"}
        assert (await ledger.conversation(key)).agent_state == {}  # the session state went too
        theirs = await service.get_session(app_name=APP, user_id="bob", session_id=other.id)
        assert theirs is not None
        assert theirs.events[0].content == _said("hello", 1.0).content


async def test_a_stale_session_is_refused_with_adk_s_error_and_the_ledger_s(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        session = await service.create_session(app_name=APP, user_id=USER)
        copy = Session.model_validate(session.model_dump())
        await service.append_event(session, _said("first", session.last_update_time + 1))
        with pytest.raises(AdkStaleSession) as info:
            await service.append_event(copy, _said("late", session.last_update_time + 2))
        assert isinstance(info.value, ContextLedgerError)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert len(got.events) == 1


def _holding_itself() -> dict[str, Any]:
    value: dict[str, Any] = {"k": 1}
    value["self"] = [value]
    return value


async def test_values_with_no_json_form_are_refused_typed_and_nothing_is_stored(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        with pytest.raises(InvalidMessage, match="state key 'x' cannot be stored as JSON"):
            await service.create_session(app_name=APP, user_id=USER, session_id="bad", state={"x": _holding_itself()})
        assert await service.get_session(app_name=APP, user_id=USER, session_id="bad") is None
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s", state={"kept": 1})
        await service.append_event(session, _said("hello", 1.0))
        bad_events = [
            Event(author="user", content=_said("x", 2.0).content, timestamp=2.0, custom_metadata=_holding_itself()),
            Event(
                author="agent",
                timestamp=2.0,
                content=types.Content(
                    role="model",
                    parts=[types.Part(function_call=types.FunctionCall(id="c1", name="f", args=_holding_itself()))],
                ),
            ),
            Event(
                author="user",
                content=_said("x", 2.0).content,
                timestamp=2.0,
                actions=EventActions(state_delta={"app:x": _holding_itself()}),
            ),
        ]
        for event in bad_events:
            with pytest.raises(InvalidMessage, match="cannot be stored as JSON"):
                await service.append_event(session, event)
            assert [e.content.parts[0].text for e in session.events if e.content and e.content.parts] == ["hello"]
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="s")
        assert stored is not None
        assert [e.content.parts[0].text for e in stored.events if e.content and e.content.parts] == ["hello"]
        assert stored.state == {"kept": 1}
        await service.append_event(stored, _said("still works", 3.0))
        again = await service.get_session(app_name=APP, user_id=USER, session_id="s")
        assert again is not None
        assert len(again.events) == 2


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="url or a ledger"):
        LedgerSessionService("memory://", ledger=Ledger.connect("memory://"))
    with pytest.raises(ConfigurationError, match="Ledger or an AsyncLedger"):
        LedgerSessionService(ledger="memory://")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="callable"):
        LedgerSessionService("memory://", manager=object())  # type: ignore[arg-type]
    assert "secret" not in repr(LedgerSessionService("postgresql+psycopg://user:secret@localhost/db"))


def test_without_google_adk_the_error_names_the_extra() -> None:
    blocked = "import sys; sys.modules['google.adk'] = None; import contextledger.integrations.adk"
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    assert "MissingDependency" in result.stderr
    assert "pip install 'contextledger[adk]'" in result.stderr
