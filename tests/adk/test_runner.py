"""A real ADK ``Runner`` on the ledger, driven by a scripted model: managed context, recorded model input."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer

from contextledger.errors import ReductionFailed
from contextledger.integrations.adk import (
    CallTool,
    LedgerSessionService,
    Overflow,
    ScriptedLlm,
    ledger_session_id,
)
from contextledger.managers import SummarizingConversationManager
from tests.adk.scenarios import (
    APP,
    TURNS,
    USER,
    build,
    model_inputs,
    say,
    script_with_tools_and_an_overflow,
    sliding,
)

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:.*EXPERIMENTAL.*:UserWarning")]


async def test_every_model_input_is_the_view_the_ledger_rebuilds(ledger_url: tuple[str, dict[str, Any]]) -> None:
    url, options = ledger_url
    async with LedgerSessionService(url, manager=sliding(6), **options) as service:
        runner, model = build(service, script_with_tools_and_an_overflow())
        session = await service.create_session(app_name=APP, user_id=USER)
        for text in TURNS:
            await say(runner, session.id, text)
        ledger = await service.ledger()
        key = ledger_session_id(APP, USER, session.id)

        # Seven answers and the call that overflowed: 8 model calls, each input rebuilt exactly.
        assert len(model.calls) == 8
        assert await model_inputs(ledger, session.id, 8) == [call.contents for call in model.calls]
        assert (await ledger.conversation(key)).model_call_count == 8

        # The overflow was reduced reactively and the call made again on the smaller view.
        reactive = [r for r in await ledger.reductions(key) if r.trigger == "reactive"]
        assert len(reactive) == 1
        assert reactive[0].error is not None
        assert "ContextWindowOverflowError" in reactive[0].error
        assert len(model.calls[5].contents) < len(model.calls[4].contents)
        # The window was kept each turn too, and nothing was lost: every event is in the history.
        assert any(r.trigger == "per_turn" for r in await ledger.reductions(key))
        stored = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert stored is not None
        history = await ledger.history(key)
        assert [e.id for e in stored.events] == [h.message.message_id for h in history]
        evicted = {e.entry_id for e in await ledger.evictions(key)}
        assert evicted
        assert evicted <= {h.message.message_id for h in history}
        # A call and its response always left the view together.
        for contents in (call.contents for call in model.calls):
            calls = {p["function_call"]["id"] for c in contents for p in c["parts"] if "function_call" in p}
            answers = {p["function_response"]["id"] for c in contents for p in c["parts"] if "function_response" in p}
            assert answers <= calls


async def test_state_scopes_through_a_runner(ledger_url: tuple[str, dict[str, Any]]) -> None:
    url, options = ledger_url
    async with LedgerSessionService(url, **options) as service:
        runner, _ = build(service, [CallTool("remember", {"fact": "likes trains"}), "Noted."])
        session = await service.create_session(app_name=APP, user_id=USER, state={"user:name": "Ada"})
        await say(runner, session.id, "Remember I like trains.")
        ledger = await service.ledger()
        assert await ledger.user_state(APP, USER) == {"name": "Ada", "fact": "likes trains"}
        assert await ledger.app_state(APP) == {"remembered": 1}
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.state == {
            "last_fact": "likes trains",
            "user:name": "Ada",
            "user:fact": "likes trains",
            "app:remembered": 1,
        }
        assert all("temp:scratch" not in e.actions.state_delta for e in got.events)
        listed = await ledger.sessions(app=APP, user=USER)
        assert [i.session_id for i in listed] == [ledger_session_id(APP, USER, session.id)]


async def test_a_summarizing_manager_summarizes_what_the_model_no_longer_sees(sqlite_url: str) -> None:
    def manager() -> SummarizingConversationManager:
        return SummarizingConversationManager(
            summary_ratio=0.5, preserve_recent_messages=2, summarizer=lambda entries: f"{len(entries)} earlier entries"
        )

    async with LedgerSessionService(sqlite_url, manager=manager) as service:
        runner, model = build(service, ["one", "two", Overflow(), "three", "four"])
        session = await service.create_session(app_name=APP, user_id=USER)
        for text in ("first", "second", "third", "fourth"):
            await say(runner, session.id, text)
        ledger = await service.ledger()
        key = ledger_session_id(APP, USER, session.id)
        (summary,) = await ledger.summaries(key)
        assert summary.content.endswith("earlier entries")
        assert model.calls[3].contents[0] == {"role": "user", "parts": [{"text": summary.content}]}
        assert await model_inputs(ledger, session.id, len(model.calls)) == [c.contents for c in model.calls]


async def test_adk_compaction_is_a_recorded_reduction_with_its_summary(ledger_url: tuple[str, dict[str, Any]]) -> None:
    url, options = ledger_url
    summarizer = ScriptedLlm(script=["SUMMARY ONE", "SUMMARY TWO"])
    compaction = EventsCompactionConfig(
        compaction_interval=2, overlap_size=0, summarizer=LlmEventSummarizer(llm=summarizer)
    )
    async with LedgerSessionService(url, **options) as service:
        runner, model = build(
            service, ["a1", "a2", "a3", "a4", CallTool("lookup", {"city": "Rome"}), "a5"], compaction=compaction
        )
        session = await service.create_session(app_name=APP, user_id=USER)
        for text in ("q1", "q2", "q3", "q4", "q5"):
            await say(runner, session.id, text)
        ledger = await service.ledger()
        key = ledger_session_id(APP, USER, session.id)
        reductions = await ledger.reductions(key)
        assert [(r.strategy, r.trigger) for r in reductions] == [("adk_compaction", "end_of_invocation")] * 2
        summaries = await ledger.summaries(key)
        assert [s.content for s in summaries] == ["SUMMARY ONE", "SUMMARY TWO"]
        assert all(s.summarizer == "adk:events_compaction" for s in summaries)
        texts = {h.message.message_id: h.message.plain_text for h in await ledger.history(key)}
        assert sorted(texts[i] for i in summaries[0].replaces) == ["a1", "a2", "q1", "q2"]
        # The model sees each summary in place of what it covers, exactly as view_at rebuilds it.
        assert model.calls[4].contents[:3] == [
            {"role": "user", "parts": [{"text": "SUMMARY ONE"}]},
            {"role": "user", "parts": [{"text": "SUMMARY TWO"}]},
            {"role": "user", "parts": [{"text": "q5"}]},
        ]
        assert await model_inputs(ledger, session.id, len(model.calls)) == [c.contents for c in model.calls]
        # ADK still gets every event back, the compaction events included.
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert sum(1 for e in got.events if e.actions.compaction is not None) == 2


async def test_an_overflow_nothing_can_reduce_fails_clearly(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url, manager=sliding(40)) as service:
        runner, model = build(service, [Overflow(), Overflow(), Overflow()])
        session = await service.create_session(app_name=APP, user_id=USER)
        # ADK wraps what a plugin raises in a RuntimeError naming the plugin; the ledger's error is its cause.
        with pytest.raises(RuntimeError, match="plugin 'contextledger'") as info:
            await say(runner, session.id, "hello")
        assert isinstance(info.value.__cause__, ReductionFailed)
        assert "nothing left to reduce" in str(info.value.__cause__)
        assert len(model.calls) == 1  # no second call on a view that could not shrink


async def test_without_a_manager_an_overflow_reaches_the_caller(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        runner, _ = build(service, [Overflow()])
        session = await service.create_session(app_name=APP, user_id=USER)
        with pytest.raises(Exception, match="context window") as info:
            await say(runner, session.id, "hello")
        assert type(info.value).__name__ == "ContextWindowOverflowError"
