"""The ADK service's ``append_event`` inline: on the caller's loop when the event is one commit that need not wait.

On SQLite and in-memory ledgers an :class:`~contextledger.aio.AsyncLedger` appends on the
caller's thread (``inline``, its default there). The service takes that path for an
event of an open session whose state changes stay in the session: its one commit runs on
the loop, no worker is handed anything. Anything else -- a read first, a merge of
``app:`` or ``user:`` state after, a write lock held elsewhere, an id already stored --
runs on a worker as before, and loses nothing.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.genai import types

from contextledger.aio import AsyncLedger
from contextledger.integrations.adk import AdkStaleSession, CallTool, LedgerSessionService
from contextledger.integrations.adk.events import ledger_session_id
from contextledger.stores.sql import SQLStore
from tests.adk.scenarios import APP as SCENARIO_APP
from tests.adk.scenarios import USER as SCENARIO_USER
from tests.adk.scenarios import build, model_inputs, say
from tests.aio.heartbeat import heartbeat
from tests.aio.test_runner import statement_threads

pytestmark = pytest.mark.anyio

APP, USER = "shop", "ada"
INLINE_URLS = ("memory://", "sqlite")


def _said(text: str, timestamp: float, state: dict[str, Any] | None = None) -> Event:
    return Event(
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        timestamp=timestamp,
        actions=EventActions(state_delta=state or {}),
    )


def _parts(event: Event) -> list[str]:
    """What each part of ``event`` says, without the ids ADK makes afresh for each run."""
    assert event.content is not None
    out = []
    for part in event.content.parts or []:
        if part.function_call is not None:
            out.append(f"call {part.function_call.name}({part.function_call.args})")
        elif part.function_response is not None:
            out.append(f"response {part.function_response.name}: {part.function_response.response}")
        else:
            out.append(f"text {part.text}")
    return out


def _texts(session: Any) -> list[str]:
    return [e.content.parts[0].text for e in session.events]


async def test_an_event_of_an_open_session_commits_on_the_loop_thread_where_the_ledger_appends_inline(
    ledger_url: tuple[str, dict[str, Any]],
) -> None:
    url, options = ledger_url
    inline = url.startswith(INLINE_URLS)
    async with LedgerSessionService(url, **options) as service:
        ledger = await service.ledger()
        assert ledger.inline is inline
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
        loop_thread = threading.get_ident()
        for n in range(3):
            calls = ledger.runner.calls
            event = _said(f"q{n}", session.last_update_time + 1, {"turn": n})
            if isinstance(ledger.store, SQLStore) and ledger.store.engine.dialect.name == "sqlite":
                with statement_threads(ledger.store) as threads:
                    await service.append_event(session, event)
                assert threads == {loop_thread}  # the event's commit ran on the caller's thread
            else:
                await service.append_event(session, event)
            assert ledger.runner.calls == calls + (0 if inline else 1)  # no hand-over inline; one otherwise
        got = await service.get_session(app_name=APP, user_id=USER, session_id="s")
        assert got is not None
        assert _texts(got) == ["q0", "q1", "q2"]
        assert got.state == {"turn": 2}


async def test_app_and_user_state_and_an_unopened_session_run_on_a_worker_and_lose_nothing(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        ledger = await service.ledger()
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
        calls = ledger.runner.calls
        await service.append_event(session, _said("shared", session.last_update_time + 1, {"app:theme": "dark"}))
        assert ledger.runner.calls == calls + 1  # merged into the app's state after the commit: a worker's job
        assert await ledger.app_state(APP) == {"theme": "dark"}
    # Another service (another process, say) on the same file has never opened the session.
    async with LedgerSessionService(sqlite_url) as other:
        ledger = await other.ledger()
        calls = ledger.runner.calls
        await other.append_event(session, _said("elsewhere", session.last_update_time + 1, {"user:lang": "en"}))
        assert ledger.runner.calls > calls  # read first, then merged: on workers
        calls = ledger.runner.calls
        await other.append_event(session, _said("again", session.last_update_time + 1))
        assert ledger.runner.calls == calls  # now open: inline
        got = await other.get_session(app_name=APP, user_id=USER, session_id="s")
        assert got is not None
        assert _texts(got) == ["shared", "elsewhere", "again"]
        assert got.state == {"app:theme": "dark", "user:lang": "en"}


async def test_an_event_delivered_again_inline_is_stored_once_and_a_stale_session_is_refused(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        ledger = await service.ledger()
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
        stale = session.model_copy(deep=True)
        event = _said("once", session.last_update_time + 1, {"n": 1})
        await service.append_event(session, event)
        calls = ledger.runner.calls
        await service.append_event(session, event)  # the same event again: its stored copy is read on a worker
        assert ledger.runner.calls == calls + 1
        with pytest.raises(AdkStaleSession):  # refused inline, nothing committed
            await service.append_event(stale, _said("late", session.last_update_time + 2))
        assert ledger.runner.calls == calls + 1
        got = await service.get_session(app_name=APP, user_id=USER, session_id="s")
        assert got is not None
        assert _texts(got) == ["once"]
        assert got.state == {"n": 1}
        assert len(await ledger.history("shop/ada/s", "default")) == 1


async def test_an_inline_event_never_waits_on_the_loop_for_a_write_lock_held_elsewhere(tmp_path: Any) -> None:
    path = tmp_path / "locked.db"
    lags: list[float] = []
    async with LedgerSessionService(f"sqlite:///{path}") as service:
        ledger = await service.ledger()
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
        await service.append_event(session, _said("first", session.last_update_time + 1))
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        threading.Timer(0.3, holder.commit).start()  # the lock is released 0.3 s later
        calls = ledger.runner.calls
        beat = asyncio.create_task(heartbeat(lags, 0.01))
        await asyncio.sleep(0.02)
        await service.append_event(session, _said("while locked", session.last_update_time + 1))
        beat.cancel()
        holder.close()
        assert ledger.runner.calls == calls + 1  # it waited on a worker
        got = await service.get_session(app_name=APP, user_id=USER, session_id="s")
        assert got is not None
        assert _texts(got) == ["first", "while locked"]
    assert len(lags) >= 10  # the loop beat all through the 0.3 s the append waited
    assert max(lags) < 0.25


async def test_a_service_on_a_ledger_opened_without_inline_hands_every_event_to_a_worker(sqlite_url: str) -> None:
    ledger = await AsyncLedger.connect(sqlite_url, inline=False)
    try:
        service = LedgerSessionService(ledger=ledger)
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s")
        calls = ledger.runner.calls
        await service.append_event(session, _said("q", session.last_update_time + 1))
        assert ledger.runner.calls == calls + 1
    finally:
        await ledger.close()


async def test_a_session_created_elsewhere_after_this_service_looked_for_it_is_read_before_the_event(
    sqlite_url: str,
) -> None:
    async with LedgerSessionService(sqlite_url) as service, LedgerSessionService(sqlite_url) as other:
        assert await service.get_session(app_name=APP, user_id=USER, session_id="s") is None  # opened, empty
        session = await other.create_session(app_name=APP, user_id=USER, session_id="s")
        await service.append_event(session, _said("first", session.last_update_time + 1))
        got = await other.get_session(app_name=APP, user_id=USER, session_id="s")
        assert got is not None
        assert _texts(got) == ["first"]


async def test_through_adk_s_runner_each_event_and_model_call_of_a_turn_is_one_worker_call_fewer(
    tmp_path: Any,
) -> None:
    """A real ADK turn (agent, tool call, the ledger's plugin): its events and model calls run inline.

    The same turn on a ledger opened with ``inline=False`` makes exactly one worker call
    more per stored event and two more per model call (the plugin's count before it and
    its report after it), and stores the same events.
    """
    calls: dict[bool, int] = {}
    stored: dict[bool, list[Any]] = {}
    made: dict[bool, int] = {}
    for inline in (True, False):
        ledger = await AsyncLedger.connect(f"sqlite:///{tmp_path / f'inline-{inline}.db'}", inline=inline)
        try:
            service = LedgerSessionService(ledger=ledger)
            runner, model = build(service, [CallTool("lookup", {"city": "Paris"}), "Paris is sunny."])
            await service.create_session(app_name=SCENARIO_APP, user_id=SCENARIO_USER, session_id="s")
            before = ledger.runner.calls
            await say(runner, "s", "Weather in Paris?")
            calls[inline] = ledger.runner.calls - before
            made[inline] = len(model.calls)
            # each call counted, and the input time travel rebuilds for it is what the model got
            key = ledger_session_id(SCENARIO_APP, SCENARIO_USER, "s")
            assert (await ledger.conversation(key)).model_call_count == len(model.calls)
            assert await model_inputs(ledger, "s", len(model.calls)) == [call.contents for call in model.calls]
            session = await service.get_session(app_name=SCENARIO_APP, user_id=SCENARIO_USER, session_id="s")
            assert session is not None
            stored[inline] = [(e.author, _parts(e)) for e in session.events]
        finally:
            await ledger.close()
    assert len(stored[True]) == 4  # the question, the call, its response, the answer
    assert stored[True] == stored[False]
    assert made[True] == made[False] == 2  # the tool call, then the answer
    assert calls[False] - calls[True] == len(stored[True]) + 2 * made[True]


@pytest.mark.parametrize("listener", [False, True])
async def test_with_a_manager_the_model_calls_run_inline_unless_a_callback_of_yours_hears_them(
    tmp_path: Any, listener: bool
) -> None:
    """A manager plans without I/O: its callbacks and evictions run on the loop; a callback of yours may block.

    Against ``inline=False`` a turn makes one worker call fewer per event, and two fewer
    per model call (one when the application's own callback hears the count before it).
    Both ledgers count the same three model calls and evict the same.
    """
    from contextledger.core.hooks import BeforeModelCallEvent
    from contextledger.integrations.adk.scripted import Step
    from contextledger.managers import SlidingWindowConversationManager

    calls: dict[bool, int] = {}
    counted: dict[bool, int] = {}
    stored: dict[bool, int] = {}
    evicted: dict[bool, int] = {}
    for inline in (True, False):
        ledger = await AsyncLedger.connect(f"sqlite:///{tmp_path / f'managed-{inline}.db'}", inline=inline)
        try:
            service = LedgerSessionService(
                ledger=ledger, manager=lambda: SlidingWindowConversationManager(window_size=3, per_turn=True)
            )
            script: list[Step] = [
                CallTool("lookup", {"city": "Paris"}),
                CallTool("lookup", {"city": "Rome"}),
                "Both sunny.",
            ]
            runner, _model = build(service, script)
            await service.create_session(app_name=SCENARIO_APP, user_id=SCENARIO_USER, session_id="s")
            if listener:
                core = await service.core()
                opened = await asyncio.to_thread(core.conversation, SCENARIO_APP, SCENARIO_USER, "s")
                opened.hooks.add_callback(BeforeModelCallEvent, lambda _event: None)
            before = ledger.runner.calls
            await say(runner, "s", "Weather in Paris?")
            calls[inline] = ledger.runner.calls - before
            session = await service.get_session(app_name=SCENARIO_APP, user_id=SCENARIO_USER, session_id="s")
            assert session is not None
            stored[inline] = len(session.events)
            key = ledger_session_id(SCENARIO_APP, SCENARIO_USER, "s")
            counted[inline] = (await ledger.conversation(key)).model_call_count
            evicted[inline] = sum(len(r.evicted) for r in await ledger.reductions(key))
        finally:
            await ledger.close()
    assert stored == {True: 6, False: 6}  # the question, two calls and their responses, the answer
    assert counted == {True: 3, False: 3}
    assert evicted[True] == evicted[False] > 0  # the window of 3 evicted the first pair before the third call
    # with your callback, the count before each call runs on a worker; the report after it does not
    assert calls[False] - calls[True] == stored[True] + (1 if listener else 2) * 3
