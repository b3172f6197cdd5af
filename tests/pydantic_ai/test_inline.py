"""Pydantic AI runs on SQLite: the history's commits and its model-call cycle run on the agent's own loop thread.

A real ``Agent`` with the ``LedgerHistory`` capability and a sliding window, whose model
overflows once (the reactive reduction truncates a tool return): on a ledger that runs
calls inline (SQLite's default) against the same runs on one opened with
``inline=False``, each model request's count and its end, and each commit, make no
worker call; both record the same views and reductions.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage

from contextledger.aio import AsyncLedger
from contextledger.integrations.pydantic_ai import LedgerHistory
from tests.pydantic_ai.scenarios import assert_view_at_is_what_the_model_received, build, sliding
from tests.pydantic_ai.test_conformance import PROMPTS, script


def _said(messages: list[ModelMessage]) -> list[str]:
    """What a request's messages say, part by part, without the times and ids each run makes afresh."""
    return [
        f"{part.part_kind}:{getattr(part, 'content', getattr(part, 'tool_name', ''))}"
        for m in messages
        for part in m.parts
    ]


def test_the_model_cycle_and_the_commits_of_a_run_make_no_worker_call_on_sqlite(tmp_path: Path) -> None:
    async def runs(inline: bool) -> tuple[int, int, list[Any], list[str]]:
        model = script()
        model.steps.insert(0, "Hello to you.")
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path}/runs-{inline}.db", inline=inline) as ledger:
            history = LedgerHistory("order-help", ledger=ledger, manager=sliding())
            agent = build(model, history)
            await agent.run("Hello")  # the conversation's first commit: on a worker either way
            calls = ledger.runner.calls
            for prompt in PROMPTS:
                await agent.run(prompt)
            made = ledger.runner.calls - calls
            conversation = await history.conversation()
            reductions = [f"{r.trigger}:{r.strategy}" for r in await ledger.reductions("order-help")]
            await assert_view_at_is_what_the_model_received(ledger, "order-help", model.received)
            return made, conversation.model_call_count, [_said(m) for m in model.received], reductions

    inline_calls, count, received, reductions = asyncio.run(runs(True))
    worker_calls, worker_count, worker_received, worker_reductions = asyncio.run(runs(False))
    assert count == worker_count == 7  # the greeting, six requests (the overflowed one counts too)
    assert received == worker_received
    assert reductions == worker_reductions
    assert "reactive:sliding_window" in reductions
    # each commit of the mirror, each request's count and its end: inline; what is left is
    # the re-read each run starts with (another process may have written since), and the
    # reactive truncation after the overflow (a revision: off SQLite's one-transaction path,
    # it committed nothing inline and a worker committed it)
    assert inline_calls == len(PROMPTS) + 1
    assert worker_calls - inline_calls >= 2 * 6
