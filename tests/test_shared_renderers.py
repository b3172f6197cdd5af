"""Host objects made per call share the renderer kept with the ledger's shared view (LangChain, OpenAI Agents).

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
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from contextledger import Ledger
from contextledger.aio import AsyncLedger
from contextledger.integrations.langchain import LedgerChatMessageHistory, convert
from contextledger.integrations.openai_agents import LedgerSession
from tests.openai_agents.test_renderer import CountingChecks, _turn


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
