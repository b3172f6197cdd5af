"""A LangChain agent in a process of its own, for the restart tests: killed mid-tool, then resumed.

``python -m tests.langchain.child first --url URL --out DIR`` runs three turns with tools
and a context overflow; in the third the tool writes ``DIR/in_tool`` and waits to be
killed. ``resume`` starts a new agent on the same ledger and runs one more turn. Every
model call appends what it received to ``DIR/calls.jsonl`` (flushed and synced before
the model answers), so the parent knows what each call saw even of a killed process.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import BaseMessage, HumanMessage, messages_to_dict
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

from contextledger import Ledger
from contextledger.integrations.langchain import CallTool, LedgerMiddleware, ScriptedChatModel
from contextledger.managers import SlidingWindowConversationManager

SESSION = "killed-agent"
SYSTEM = "You are a terse support agent."
OUT = Path(".")


class RecordingModel(ScriptedChatModel):
    """The scripted model, writing what each call received to a file before it answers."""

    _path: Path = PrivateAttr()

    def __init__(self, path: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._path = path

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._path.open("a") as out:
            out.write(json.dumps(messages_to_dict(messages[1:])) + "\n")  # after the system prompt
            out.flush()
            os.fsync(out.fileno())
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped from Lyon. " + "tracking line. " * 30


@tool
def locate(order: str) -> str:
    """Locate a parcel (slow: the process is killed while it runs)."""
    (OUT / "in_tool").write_text(order)
    time.sleep(120)
    return "never"


def agent(ledger: Ledger, script: list[Any]) -> Any:
    model = RecordingModel(OUT / "calls.jsonl", script=script)
    manager = SlidingWindowConversationManager(window_size=8, per_turn=True, truncate_threshold=200)
    middleware = LedgerMiddleware(ledger, SESSION, manager=manager)
    return create_agent(model, tools=[lookup, locate], system_prompt=SYSTEM, middleware=[middleware])


def first(ledger: Ledger) -> None:
    run = agent(
        ledger,
        [
            CallTool("lookup", {"order": "A-1"}, call_id="call-a1"),
            "A-1 shipped from Lyon.",
            ContextOverflowError("prompt is too long"),
            "Noted: refund 5 on A-1.",
            CallTool("locate", {"order": "B-2"}, call_id="call-b2"),
        ],
    )
    for prompt in ["Where is A-1?", "Refund 5 on A-1.", "Where is B-2 right now?"]:
        run.invoke({"messages": [HumanMessage(prompt)]})
    raise AssertionError("the locate tool should have been killed")


def resume(ledger: Ledger) -> None:
    run = agent(ledger, ["B-2 was interrupted; it is in Paris now."])
    out = run.invoke({"messages": [HumanMessage("Any news on B-2?")]})
    (OUT / "resumed.json").write_text(json.dumps(messages_to_dict(out["messages"])))


def main() -> None:
    global OUT
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["first", "resume"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    OUT = Path(args.out)
    with Ledger.connect(args.url) as ledger:
        {"first": first, "resume": resume}[args.command](ledger)


if __name__ == "__main__":
    main()
