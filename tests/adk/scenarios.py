"""A real ADK app on the ledger: an agent with tools, driven by a scripted model (shared by the tests and the child)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.plugins import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from contextledger.aio import AsyncLedger
from contextledger.integrations.adk import (
    CallTool,
    LedgerPlugin,
    LedgerSessionService,
    Overflow,
    ScriptedLlm,
    Step,
    contents_of,
    ledger_session_id,
)
from contextledger.managers import SlidingWindowConversationManager

APP = "travel"
USER = "ada"


def lookup(city: str) -> dict[str, str]:
    """Look up the weather in a city."""
    return {"weather": f"sunny in {city}", "details": "a long forecast " * 20}


def remember(fact: str, tool_context: ToolContext) -> dict[str, str]:
    """Remember a fact for this user, and a counter for the app."""
    tool_context.state["user:fact"] = fact
    tool_context.state["app:remembered"] = int(tool_context.state.get("app:remembered", 0)) + 1
    tool_context.state["temp:scratch"] = "never stored"
    tool_context.state["last_fact"] = fact
    return {"remembered": fact}


def sliding(window_size: int = 6) -> Callable[[], SlidingWindowConversationManager]:
    """A manager factory: a sliding window that also trims each turn."""
    return lambda: SlidingWindowConversationManager(window_size=window_size, per_turn=True)


def script_with_tools_and_an_overflow() -> list[Step]:
    """Four turns: two with a tool call each, then one whose first call overflows."""
    return [
        CallTool("lookup", {"city": "Paris"}),
        "Sunny in Paris.",
        CallTool("remember", {"fact": "likes trains"}),
        "Noted.",
        Overflow(),
        "Rome is sunny too.",
        CallTool("lookup", {"city": "Oslo"}),
        "Oslo as well.",
    ]


TURNS = ["Weather in Paris?", "I like trains.", "And Rome?", "Oslo?"]


def build(
    service: BaseSessionService,
    script: Sequence[Step],
    *,
    tools: Sequence[Callable[..., Any]] = (lookup, remember),
    compaction: EventsCompactionConfig | None = None,
    plugins: Sequence[BasePlugin] = (),
) -> tuple[Runner, ScriptedLlm]:
    """A runner of one agent on ``service``, with ``script`` as its model (and the ledger plugin on a ledger)."""
    model = ScriptedLlm(script=list(script))
    agent = LlmAgent(name="assistant", model=model, instruction="Answer briefly.", tools=list(tools))
    ledger_plugin = [LedgerPlugin(service)] if isinstance(service, LedgerSessionService) else []
    app = App(
        name=APP,
        root_agent=agent,
        plugins=[*ledger_plugin, *plugins],
        events_compaction_config=compaction,
    )
    return Runner(app=app, session_service=service), model


async def say(runner: Runner, session_id: str, text: str, user: str = USER) -> list[Any]:
    """Run one turn; the events it yielded."""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [event async for event in runner.run_async(user_id=user, session_id=session_id, new_message=message)]


async def model_inputs(
    ledger: AsyncLedger, session_id: str, calls: int, user: str = USER
) -> list[list[dict[str, Any]]]:
    """The model input of calls 1..``calls`` as the ledger rebuilds it (``view_at``), as JSON."""
    key = ledger_session_id(APP, user, session_id)
    out = []
    for n in range(1, calls + 1):
        view = await ledger.view_at(key, model_call=n)
        out.append([c.model_dump(mode="json", exclude_none=True) for c in contents_of(view)])
    return out


def dumps(value: Any) -> str:
    """JSON of test results (bytes as latin-1 text)."""
    return json.dumps(value, default=lambda b: b.decode("latin-1") if isinstance(b, bytes) else str(b))
