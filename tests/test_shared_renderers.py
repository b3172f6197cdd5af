"""Host objects made per call share the renderer kept with the ledger's shared view (LangChain, OpenAI Agents).

Also through the hosts' own drivers: LangChain's ``RunnableWithMessageHistory`` and the
SDK's ``Runner`` given a new ``LedgerSession`` per request render each message once
across their calls (without shared views, every call renders the whole conversation).

LangChain's ``RunnableWithMessageHistory`` makes a history object for every call, and a
server makes a ``LedgerSession`` per request. Each new object of a conversation whose
view the ledger keeps takes the renderer kept with it, so it renders only the messages
the objects before did not (counted on the real renderers' own steps), hands out copies
of its own, and gives exactly what a ledger without shared views gives.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory

from contextledger import Ledger
from contextledger.aio import AsyncLedger
from contextledger.integrations.langchain import LedgerChatMessageHistory, ScriptedChatModel, convert
from contextledger.integrations.openai_agents import LedgerSession, ScriptedModel
from tests.openai_agents.test_renderer import CountingChecks, _turn

# LangChain marks BaseChatMessageHistory and RunnableWithMessageHistory deprecated; these tests use them on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:.*deprecated.*")


class CountingRenders:
    """Counts the LangChain messages rendered from ledger messages (the real conversion, counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        render = convert.from_ledger

        def counted(message: Any) -> BaseMessage:
            self.count += 1
            return render(message)

        monkeypatch.setattr(convert, "from_ledger", counted)


def _chat(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {n}", id=f"h{n}"), AIMessage(f"answer {n}", id=f"a{n}")]


def test_langchain_history_objects_made_per_call_render_only_what_those_before_did_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'lc.db'}"
    with Ledger.connect(url) as ledger, Ledger.connect(url, shared_views=0) as unshared:
        LedgerChatMessageHistory("s", ledger=ledger).add_messages([*_chat(0), *_chat(1)])
        renders = CountingRenders(monkeypatch)
        # The first read after the commit that made the conversation reads the view (the
        # store's creation time learnt); its renderer is kept with the view from then on.
        first = LedgerChatMessageHistory("s", ledger=ledger).messages
        assert renders.count == 4
        second = LedgerChatMessageHistory("s", ledger=ledger).messages
        assert renders.count == 4  # a new object, the same view: nothing rendered again
        assert second == first
        second[0].content = "changed by the caller"  # copies: no other object sees it
        LedgerChatMessageHistory("s", ledger=ledger).add_messages(_chat(2))
        third = LedgerChatMessageHistory("s", ledger=ledger).messages
        assert renders.count == 6  # the two new messages only
        assert third == LedgerChatMessageHistory("s", ledger=unshared).messages
        assert [m.content for m in third][:2] == ["question 0", "answer 0"]


def test_langchain_renderers_are_not_shared_without_shared_views(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.connect(f"sqlite:///{tmp_path / 'lc.db'}", shared_views=0) as ledger:
        LedgerChatMessageHistory("s", ledger=ledger).add_messages(_chat(0))
        renders = CountingRenders(monkeypatch)
        for _ in range(3):
            assert len(LedgerChatMessageHistory("s", ledger=ledger).messages) == 2
        assert renders.count == 6


def test_openai_sessions_made_per_request_check_no_fingerprint_the_ones_before_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run() -> None:
        url = f"sqlite:///{tmp_path / 'oai.db'}"
        ledger = await AsyncLedger.connect(url)
        unshared = await AsyncLedger.connect(url, shared_views=0)
        try:
            await LedgerSession("s", ledger=ledger).add_items([*_turn(0), *_turn(1)])
            checks = CountingChecks(monkeypatch)
            first: list[Any] = await LedgerSession(
                "s", ledger=ledger
            ).get_items()  # the view read: its renderer kept with it
            assert checks.count == 8  # once per message
            second: list[Any] = await LedgerSession("s", ledger=ledger).get_items()
            assert checks.count == 8  # a new session, the same view: no fingerprint checked again
            assert second == first
            second[0]["content"] = "changed by the caller"  # copies
            await LedgerSession("s", ledger=ledger).add_items(_turn(2))
            third: list[Any] = await LedgerSession("s", ledger=ledger).get_items()
            assert checks.count == 12  # the four new messages only
            assert third == await LedgerSession("s", ledger=unshared).get_items()
            assert third[0]["content"] == "question 0"
        finally:
            await ledger.close()
            await unshared.close()

    asyncio.run(run())


@pytest.mark.parametrize(("shared_views", "rendered"), [(20_000, [0, 2, 2, 2]), (0, [0, 2, 4, 6])])
def test_runnable_with_message_history_renders_each_message_once_across_its_calls(
    shared_views: int, rendered: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangChain's own runnable makes a history object for every call, on one ledger.
    model = ScriptedChatModel(script=[f"answer {n}" for n in range(4)])
    renders = CountingRenders(monkeypatch)
    counts = []
    with Ledger.connect(f"sqlite:///{tmp_path / 'chat.db'}", shared_views=shared_views) as ledger:
        chain = RunnableWithMessageHistory(
            model, lambda session_id: LedgerChatMessageHistory(session_id, ledger=ledger)
        )
        config: RunnableConfig = {"configurable": {"session_id": "ada"}}
        for n in range(4):
            before = renders.count
            chain.invoke([HumanMessage(f"question {n}")], config=config)
            counts.append(renders.count - before)
    # Each call is given the whole conversation; with shared views it renders only the
    # exchange the call before stored (the first read after the creating commit reads the view).
    assert counts == rendered
    assert [m.content for m in model.received[3]] == [
        *[text for n in range(3) for text in (f"question {n}", f"answer {n}")],
        "question 3",
    ]


@pytest.mark.parametrize(("shared_views", "checked"), [(20_000, [0, 2, 2, 2]), (0, [0, 2, 4, 6])])
def test_runs_of_the_sdks_runner_with_a_session_per_request_check_each_fingerprint_once(
    shared_views: int, checked: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's own Runner, given a new LedgerSession for every request (a server's way), on one ledger.
    model = ScriptedModel([f"answer {n}" for n in range(4)])
    agent = Agent(name="Assistant", model=model)
    checks = CountingChecks(monkeypatch)

    async def main() -> tuple[list[int], list[Any]]:
        counts = []
        async with await AsyncLedger.connect(
            f"sqlite:///{tmp_path / 'runner.db'}", shared_views=shared_views
        ) as ledger:
            for n in range(4):
                before = checks.count
                result = await Runner.run(agent, f"question {n}", session=LedgerSession("u", ledger=ledger))
                assert result.final_output == f"answer {n}"
                counts.append(checks.count - before)
            return counts, await LedgerSession("u", ledger=ledger).get_items()

    counts, items = asyncio.run(main())
    assert counts == checked
    assert model.calls[-1].input == items[: len(model.calls[-1].input)]  # each call given the session's items
    assert [i["content"] for i in items if i.get("role") == "user"] == [f"question {n}" for n in range(4)]
