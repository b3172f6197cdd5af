"""A Pydantic AI agent in a process of its own, for the restart tests: killed mid-tool, then resumed.

``python -m tests.pydantic_ai.child first --url URL --out DIR`` runs three turns with tools
and a context overflow; in the third the tool writes ``DIR/in_tool`` and waits to be
killed. ``resume`` starts a new agent on the same ledger and runs one more turn. Every
model request appends what it received to ``DIR/calls.json`` lines (flushed and synced
before the model answers), so the parent knows what each request saw even of a killed
process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextledger.integrations.pydantic_ai import LedgerHistory
from contextledger.managers import SlidingWindowConversationManager

SESSION = "killed-agent"
OUT = Path(".")


def recording(steps: list[Any]) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        with (OUT / "calls.jsonl").open("ab") as out:
            out.write(ModelMessagesTypeAdapter.dump_json(messages) + b"\n")
            out.flush()
            os.fsync(out.fileno())
        step = steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return ModelResponse(parts=[TextPart(step) if isinstance(step, str) else step])

    return FunctionModel(answer)


def agent(url: str, steps: list[Any]) -> tuple[Agent[None, str], LedgerHistory]:
    manager = SlidingWindowConversationManager(window_size=8, per_turn=True, truncate_threshold=200)
    history = LedgerHistory(SESSION, url=url, manager=manager)
    run = Agent(recording(steps), instructions="You are a terse support agent.", capabilities=[history])

    @run.tool_plain
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: shipped from Lyon. " + "tracking line. " * 30

    @run.tool_plain
    def locate(order: str) -> str:
        """Locate a parcel (slow: the process is killed while it runs)."""
        (OUT / "in_tool").write_text(order)
        time.sleep(120)
        return "never"

    return run, history


async def first(url: str) -> None:
    run, _ = agent(
        url,
        [
            ToolCallPart("lookup", {"order": "A-1"}, tool_call_id="call-a1"),
            "A-1 shipped from Lyon.",
            ModelContextWindowExceededError("scripted", "prompt is too long"),
            "Noted: refund 5 on A-1.",
            ToolCallPart("locate", {"order": "B-2"}, tool_call_id="call-b2"),
        ],
    )
    for prompt in ["Where is A-1?", "Refund 5 on A-1.", "Where is B-2 right now?"]:
        await run.run(prompt)
    raise AssertionError("the locate tool should have been killed")


async def resume(url: str) -> None:
    run, history = agent(url, ["B-2 was interrupted; it is in Paris now."])
    result = await run.run("Any news on B-2?")
    (OUT / "resumed.json").write_bytes(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
    await history.close()


def main() -> None:
    global OUT
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["first", "resume"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    OUT = Path(args.out)
    asyncio.run({"first": first, "resume": resume}[args.command](args.url))


if __name__ == "__main__":
    main()
