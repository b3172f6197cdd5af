"""A host binding reading a conversation nothing moved walks its view once (LangChain, Pydantic AI).

A refresh that finds the stored conversation unmoved keeps the view it holds, the same
(immutable) object; the LangChain and Pydantic AI renderers then hand back what they
rendered for it without walking it again (counted on ``View.__iter__``). A write by
another handle moves the view, and the next read walks and renders it anew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from contextledger import Ledger
from contextledger.aio import AsyncLedger
from contextledger.core.view import View
from contextledger.integrations.langchain import LedgerChatMessageHistory
from contextledger.integrations.pydantic_ai import LedgerHistory, dump


class CountingWalks:
    """Counts the walks over any view (a real ``View``, its iteration counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        walk = View.__iter__

        def counted(view: View) -> Iterator[Any]:
            self.count += 1
            return walk(view)

        monkeypatch.setattr(View, "__iter__", counted)


def test_langchain_reads_of_an_unmoved_history_walk_its_view_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.connect(f"sqlite:///{tmp_path / 'lc.db'}") as ledger:
        writer = LedgerChatMessageHistory("s", ledger=ledger)
        writer.add_messages([HumanMessage("hello", id="h1"), AIMessage("hi there", id="a1")])
        history = LedgerChatMessageHistory("s", ledger=ledger)
        first = history.messages
        walks = CountingWalks(monkeypatch)
        for _ in range(3):
            again = history.messages
            assert again == first
            again[0].content = "changed by the caller"  # a copy: the next read is not changed
        assert walks.count == 0
        writer.add_messages([HumanMessage("and more", id="h2")])
        moved = history.messages
        assert walks.count == 1
        assert [m.content for m in moved] == ["hello", "hi there", "and more"]


def test_pydantic_ai_reads_of_an_unmoved_history_walk_its_view_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run() -> None:
        ledger = await AsyncLedger.connect(f"sqlite:///{tmp_path / 'pai.db'}")
        writer = LedgerHistory("s", ledger=ledger)
        turn: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("hello")]),
            ModelResponse(parts=[TextPart("hi there")]),
        ]
        await writer.extend(turn)
        history = LedgerHistory("s", ledger=ledger)
        first = await history.messages()
        walks = CountingWalks(monkeypatch)
        for _ in range(3):
            assert dump(await history.messages()) == dump(first)
        assert walks.count == 0
        more: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("and more")])]
        await writer.extend(more)
        moved = await history.messages()
        assert walks.count == 1
        assert dump(moved) == dump([*turn, *more])
        await ledger.close()

    asyncio.run(run())
