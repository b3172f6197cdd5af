"""The OpenAI Agents SDK ``Session`` contract, as tests: what ``LedgerSession`` promises an SDK app.

Subclass :class:`OpenAISessionContract` in a test module with a ``ledger_url`` fixture that
yields ``(url, options)`` of a fresh, empty ledger (options as
:meth:`~contextledger.aio.AsyncLedger.connect` takes them). Each test opens the ledger in its
own event loop and drives the SDK's real objects -- ``Runner`` (``run``, ``run_sync``,
``run_streamed``), ``EncryptedSession``, ``RunConfig``, ``ToolOutputTrimmer`` -- with
:class:`~contextledger.integrations.openai_agents.ScriptedModel`, offline. It mirrors the
SDK's own session tests (order, ``limit``, ``pop_item``, ``clear_session``, separate
sessions, memory across runs, unicode, concurrent writers, wrappers, settings as a dict)
and adds what the ledger promises besides: with ``run_config=session.run_config()``,
``view_at(model_call=N)`` is exactly what call ``N`` was given, under every manager.

Where the ledger differs from the SDK's own sessions on purpose: ``get_items(limit)``
never splits a tool call from its output or a reasoning item from what follows it (it
returns fewer items rather than half a pair), and ``pop_item``/``clear_session`` record a
reduction (the items stay in the history) instead of deleting.

Needs ``openai-agents`` and pytest (``pip install 'contextledger[openai,testing]'``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from agents import Agent, Runner
from agents.extensions import ToolOutputTrimmer
from agents.extensions.memory import EncryptedSession
from agents.memory import Session, SessionSettings

from contextledger.aio import AsyncLedger
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.openai_agents import HandoffTo, LedgerRunHooks, LedgerSession, ScriptedModel
from contextledger.integrations.openai_agents.scripted import ModelCall
from contextledger.managers import SlidingWindowConversationManager
from contextledger.testing.openai_runs import (
    MANAGERS,
    MODES,
    PROMPTS,
    LedgerURL,
    Logged,
    assert_inputs_exact,
    get_weather,
    run_in_loop,
    run_turns,
    script,
)

__all__ = ["OpenAISessionContract"]

FERNET_KEY = "5B1wWvOHbHkSVb9IpPr3kfL5lO3Tf1Bbr9zmmSxAyCs="  # a fixed test key (32 bytes, base64)


class OpenAISessionContract:
    """``LedgerSession`` as the SDK's ``Session`` contract states it, on a ``ledger_url`` fixture."""

    # -- the Session protocol --------------------------------------------------------------------

    def test_it_is_an_sdk_session_and_keeps_the_order(self, ledger_url: LedgerURL) -> None:
        """Items come back in the order added, across calls, exactly as given."""
        items: list[Any] = [
            {"role": "user", "content": "héllo ✓ 'quotes' \"and\" ; DROP TABLE x; --"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]

        async def work(ledger: AsyncLedger) -> list[Any]:
            session = LedgerSession("s", ledger=ledger)
            assert isinstance(session, Session)
            await session.add_items(items[:1])
            await session.add_items(items[1:])
            await session.add_items([])
            return await session.get_items()

        assert run_in_loop(ledger_url, work) == items

    def test_get_items_limit_takes_the_newest_without_splitting_a_pair(self, ledger_url: LedgerURL) -> None:
        """``limit`` keeps the newest items; a pair it would cut is left out whole (a documented difference)."""
        call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        items: list[Any] = [{"role": "user", "content": "hi"}, call, output, {"role": "assistant", "content": "done"}]

        async def work(ledger: AsyncLedger) -> dict[Any, list[Any]]:
            session = LedgerSession("s", ledger=ledger)
            await session.add_items(items)
            return {limit: await session.get_items(limit) for limit in (None, 0, 1, 2, 3, 4, 10)}

        got = run_in_loop(ledger_url, work)
        assert got[None] == got[4] == got[10] == items
        assert got[0] == []
        assert got[1] == got[2] == items[3:]  # the SDK would return [output, answer] for 2
        assert got[3] == items[1:]

    def test_session_settings_may_be_a_dict(self, ledger_url: LedgerURL) -> None:
        """Settings given as a dict are converted, as the SDK converts them; a runner reads them."""

        async def work(ledger: AsyncLedger) -> tuple[Any, ...]:
            session = LedgerSession("s", ledger=ledger, session_settings={"limit": 2})
            assert session.session_settings == SessionSettings(limit=2)
            await session.add_items([{"role": "user", "content": f"m{n}"} for n in range(4)])
            model = ScriptedModel(["fine"], name="dict")
            await Runner.run(Agent(name="A", model=model), "next", session=session)
            session.session_settings = {"limit": None}
            return model.calls[0].input, await session.get_items(), session.session_settings

        given, everything, settings = run_in_loop(ledger_url, work)
        assert [i["content"] for i in given] == ["m2", "m3", "next"]
        assert len(everything) == 6
        assert settings == SessionSettings(limit=None)
        with pytest.raises(ConfigurationError):
            LedgerSession("s", session_settings={"limit": "many"})

    def test_pop_item_returns_the_newest_and_keeps_it_in_the_history(self, ledger_url: LedgerURL) -> None:
        """pop_item returns the newest item (None when empty); the ledger records it as a reduction."""
        items: list[Any] = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "second"}]

        async def work(ledger: AsyncLedger) -> tuple[Any, ...]:
            session = LedgerSession("s", ledger=ledger)
            await session.add_items(items)
            popped = [await session.pop_item() for _ in range(3)]
            return popped, await session.get_items(), len(await ledger.history("s"))

        popped, left, kept = run_in_loop(ledger_url, work)
        assert popped == [items[1], items[0], None]
        assert left == []
        assert kept == 2

    def test_clear_session_and_separate_sessions(self, ledger_url: LedgerURL) -> None:
        """Clearing one session leaves another untouched; a cleared session starts empty."""

        async def work(ledger: AsyncLedger) -> tuple[Any, ...]:
            one, two = LedgerSession("one", ledger=ledger), LedgerSession("two", ledger=ledger)
            await one.add_items([{"role": "user", "content": "a"}])
            await two.add_items([{"role": "user", "content": "b"}])
            await one.clear_session()
            await one.add_items([{"role": "user", "content": "c"}])
            return await one.get_items(), await two.get_items()

        assert run_in_loop(ledger_url, work) == ([{"role": "user", "content": "c"}], [{"role": "user", "content": "b"}])

    def test_bad_items_are_refused_and_nothing_is_stored(self, ledger_url: LedgerURL) -> None:
        """A malformed item of a known type is refused with InvalidMessage; the batch is not stored."""

        async def work(ledger: AsyncLedger) -> list[Any]:
            session = LedgerSession("s", ledger=ledger)
            with pytest.raises(InvalidMessage):
                await session.add_items([{"role": "user", "content": "ok"}, {"type": "function_call"}])  # type: ignore[list-item,misc]
            with pytest.raises(InvalidMessage, match="an item is a dict"):
                await session.add_items([{"role": "user", "content": "ok"}, "hello"])  # type: ignore[list-item]
            return await session.get_items()

        assert run_in_loop(ledger_url, work) == []

    # -- the runner ----------------------------------------------------------------------------

    @pytest.mark.parametrize("mode", MODES)
    def test_a_second_run_remembers_the_first(self, ledger_url: LedgerURL, mode: str) -> None:
        """As the SDK's own sessions: the second run's model is given the first run's items."""

        async def work(ledger: AsyncLedger) -> tuple[Any, ...]:
            session = LedgerSession("s", ledger=ledger)
            model = ScriptedModel(["San Francisco", "California"], name=f"mem-{mode}")
            agent = Agent(name="A", model=model)
            outputs = await run_turns(session, agent, ["Where is the Golden Gate?", "Which state?"], mode)
            return outputs, model.calls[1].input, await session.get_items()

        outputs, second, items = run_in_loop(ledger_url, work)
        assert outputs == ["San Francisco", "California"]
        assert second == items[:3]
        assert [i.get("content") if i.get("role") == "user" else "answer" for i in items] == [
            "Where is the Golden Gate?",
            "answer",
            "Which state?",
            "answer",
        ]

    @pytest.mark.parametrize(
        ("manager", "mode"),
        [
            *((m, "run") for m in sorted(MANAGERS)),
            ("none", "run_streamed"),
            *(("sliding-per-turn", m) for m in MODES[1:]),
        ],
    )
    def test_view_at_every_call_is_what_the_model_was_given(
        self, ledger_url: LedgerURL, manager: str, mode: str
    ) -> None:
        """With the session's input filter, each call's input is rebuilt exactly, under every manager and mode."""

        async def work(ledger: AsyncLedger) -> int:
            session = LedgerSession("s", ledger=ledger, manager=MANAGERS[manager]())
            model = ScriptedModel(script(), name=f"x-{manager}-{mode}")
            agent = Agent(name="A", model=model, tools=[get_weather])
            await run_turns(session, agent, PROMPTS, mode, run_config=session.run_config())
            assert model.remaining == 0
            return await assert_inputs_exact(ledger, session, model.calls)

        assert run_in_loop(ledger_url, work) == 6

    def test_a_per_turn_window_reaches_the_call_it_was_made_for(self, ledger_url: LedgerURL) -> None:
        """The reported case: per_turn with window_size=6 -- the model gets the trimmed view, as view_at says."""

        async def work(ledger: AsyncLedger) -> list[int]:
            manager = SlidingWindowConversationManager(window_size=6, per_turn=True)
            session = LedgerSession("s", ledger=ledger, manager=manager)
            model = ScriptedModel(script(), name="window")
            agent = Agent(name="A", model=model, tools=[get_weather])
            hooks = LedgerRunHooks(session)
            await run_turns(session, agent, PROMPTS, "run", run_config=session.run_config(), hooks=hooks)
            await assert_inputs_exact(ledger, session, model.calls)
            return [len(call.input) for call in model.calls]

        sizes = run_in_loop(ledger_url, work)
        assert max(sizes) <= 6 + 1  # the window, and the tool output added by the current turn

    def test_a_handoff_and_the_sdk_tool_output_trimmer_stay_exact(self, ledger_url: LedgerURL) -> None:
        """Two agents' calls in one session, and the SDK's own input filter mirrored as a recorded revision."""

        async def work(ledger: AsyncLedger) -> tuple[Any, ...]:
            trimmer = ToolOutputTrimmer(recent_turns=1, max_output_chars=100, preview_chars=20)
            session = LedgerSession("s", ledger=ledger, input_filter=trimmer)
            log: list[ModelCall] = []
            billing = Agent(name="Billing", model=Logged(["Billing here."], name="billing", log=log))
            triage_model = Logged([*script()[:2], HandoffTo("Billing")], name="triage", log=log)
            triage = Agent(name="Triage", model=triage_model, tools=[get_weather], handoffs=[billing])
            prompts = ["Weather in Oslo?", "I want a refund."]
            await run_turns(session, triage, prompts, "run", run_config=session.run_config())
            count = await assert_inputs_exact(ledger, session, log)
            return count, await ledger.reductions("s"), await ledger.revisions("s")

        count, reductions, revisions = run_in_loop(ledger_url, work)
        assert count == 4
        assert {r.strategy for r in reductions} == {"openai:ToolOutputTrimmer"}
        assert revisions
        assert all(len(str(r.original)) > 100 for r in revisions)

    @pytest.mark.parametrize("mode", ["run", "run_streamed"])
    def test_a_session_input_callback_stores_nothing_twice(self, ledger_url: LedgerURL, mode: str) -> None:
        """With the SDK's session_input_callback the history is stored once and every call stays exact.

        The model is given the managed view: the callback's cut of the history does not
        reach it (a documented difference; a manager is the ledger's way to cut).
        """

        async def work(ledger: AsyncLedger) -> list[Any]:
            session = LedgerSession("s", ledger=ledger)
            model = ScriptedModel(["a1", "a2", "a3"], name=f"callback-{mode}")
            config = session.run_config(session_input_callback=lambda history, new: [*history[-1:], *new])
            await run_turns(session, Agent(name="A", model=model), ["q1", "q2", "q3"], mode, run_config=config)
            await assert_inputs_exact(ledger, session, model.calls)
            return await session.get_items()

        items = run_in_loop(ledger_url, work)
        assert [i["content"] if i.get("role") == "user" else i["content"][0]["text"] for i in items] == [
            "q1",
            "a1",
            "q2",
            "a2",
            "q3",
            "a3",
        ]

    def test_run_hooks_without_the_input_filter_are_refused(self, ledger_url: LedgerURL) -> None:
        """Counting calls needs the filter: the hooks say so at the first call instead of recording a guess."""

        async def work(ledger: AsyncLedger) -> None:
            session = LedgerSession("s", ledger=ledger)
            agent = Agent(name="A", model=ScriptedModel(["hi"], name="nofilter"))
            with pytest.raises(ConfigurationError, match=r"run_config=session\.run_config"):
                await Runner.run(agent, "hello", session=session, hooks=LedgerRunHooks(session))
            with pytest.raises(ConfigurationError, match=r"input_filter="):
                session.run_config(call_model_input_filter=lambda data: data.model_data)

        run_in_loop(ledger_url, work)

    # -- wrappers ------------------------------------------------------------------------------

    def test_the_sdk_encrypted_session_wraps_a_ledger_session(self, ledger_url: LedgerURL) -> None:
        """EncryptedSession around LedgerSession: its envelopes are kept exactly; a runner reads them back."""

        async def work(ledger: AsyncLedger) -> tuple[Any, ...]:
            inner = LedgerSession("s", ledger=ledger)
            session = EncryptedSession("s", underlying_session=inner, encryption_key=FERNET_KEY)  # type: ignore[arg-type]
            model = ScriptedModel(["first", "second"], name="enc")
            agent = Agent(name="A", model=model)
            await Runner.run(agent, "one", session=session)
            await Runner.run(agent, "two", session=session)
            stored = await inner.get_items()
            with pytest.raises(ConfigurationError, match="without the input filter"):
                await Runner.run(agent, "three", session=session, run_config=inner.run_config())
            popped = await session.pop_item()
            after_pop = await session.get_items()
            await session.clear_session()
            return model.calls[1].input, stored, popped, after_pop, await session.get_items()

        second, stored, popped, after_pop, cleared = run_in_loop(ledger_url, work)
        assert [i.get("content") for i in second if i.get("role") == "user"] == ["one", "two"]
        assert len(stored) == 4
        assert all(set(e) == {"__enc__", "v", "kid", "payload"} for e in stored)  # opaque, kept as given
        assert popped == {"role": "user", "content": "three"}  # the SDK saved the refused run's input first
        assert len(after_pop) == 4
        assert cleared == []

    # -- concurrency ---------------------------------------------------------------------------

    def test_concurrent_writers_in_one_loop_lose_nothing(self, ledger_url: LedgerURL) -> None:
        """Tasks adding at once each land once; every item is there."""

        async def work(ledger: AsyncLedger) -> list[Any]:
            session = LedgerSession("s", ledger=ledger)
            await asyncio.gather(*(session.add_items([{"role": "user", "content": f"m{n}"}]) for n in range(10)))
            return await session.get_items()

        items = run_in_loop(ledger_url, work)
        assert sorted(i["content"] for i in items) == sorted(f"m{n}" for n in range(10))

    def test_one_session_from_several_threads_each_with_its_own_loop(self, ledger_url: LedgerURL) -> None:
        """The pattern of Runner.run_sync in a threaded server: every add_items lands once, none hangs."""
        url, options = ledger_url
        session = LedgerSession("s", url=url) if not options else None
        if session is None:
            ledger = asyncio.run(AsyncLedger.connect(url, **options))
            session = LedgerSession("s", ledger=ledger)
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for k in range(2):
                    asyncio.run(session.add_items([{"role": "user", "content": f"t{n}-{k}"}]))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(5)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 5  # a hang shows within seconds; the rest of the suite waits less
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "an add_items call never returned"
        assert errors == []
        items: list[Any] = asyncio.run(session.get_items())
        assert sorted(i["content"] for i in items) == sorted(f"t{n}-{k}" for n in range(5) for k in range(2))
