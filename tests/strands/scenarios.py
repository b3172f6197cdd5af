"""Agents, tools and scripts shared by the Strands tests and their child processes."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from strands import Agent, tool
from strands.agent.conversation_manager import (
    ConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    HookOrder,
    HookRegistry,
    MessageAddedEvent,
)
from strands.session.session_manager import SessionManager
from strands.types.exceptions import ContextWindowOverflowException

from contextledger.integrations.strands.scripted import CallTool, Overflow, Reply, ScriptedModel, Step
from contextledger.model.messages import decode_blocks, encode_blocks

CONTEXT_WINDOW = 4000
THRESHOLD = 0.7
BIG = 3500  # reported input tokens that put the next call over the proactive threshold


@tool
def lookup(key: str) -> str:
    """Look up a key in the catalogue and return the long entry."""
    return f"entry {key}: " + " ".join(f"{key}-{i}" for i in range(200))


@tool
def remember(fact: str) -> str:
    """Store a fact."""
    return f"stored: {fact}"


def sliding_manager() -> SlidingWindowConversationManager:
    """Strands' sliding window with every option the issue names."""
    return SlidingWindowConversationManager(
        window_size=6,
        per_turn=2,
        pin_first=1,
        proactive_compression={"compression_threshold": THRESHOLD},
    )


def summarizing_manager() -> SummarizingConversationManager:
    return SummarizingConversationManager(
        summary_ratio=0.5,
        preserve_recent_messages=2,
        pin_first=1,
        proactive_compression={"compression_threshold": THRESHOLD},
    )


MANAGERS: dict[str, Callable[[], ConversationManager]] = {
    "sliding": sliding_manager,
    "summarizing": summarizing_manager,
}


def build_agent(
    session_manager: SessionManager | None,
    manager: ConversationManager,
    script: Sequence[Step] = (),
    *,
    agent_id: str | None = None,
    tools: Sequence[Any] = (lookup, remember),
    hooks: Sequence[Any] = (),
) -> Agent:
    return Agent(
        model=ScriptedModel(script, context_window_limit=CONTEXT_WINDOW),
        tools=list(tools),
        callback_handler=None,
        session_manager=session_manager,
        conversation_manager=manager,
        agent_id=agent_id,
        hooks=list(hooks),
    )


def model_of(agent: Agent) -> ScriptedModel:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return model


# Each invocation: (prompt, the model's steps for it).
SLIDING_RUN: list[tuple[str, list[Step]]] = [
    ("My name is Ada. Remember it.", [Reply("Noted, Ada.")]),
    ("Look up alpha.", [CallTool("lookup", {"key": "alpha"}, "tu-alpha"), Reply("alpha found")]),
    ("Look up beta.", [CallTool("lookup", {"key": "beta"}, "tu-beta"), Reply("beta found")]),
    # an overflow: the oldest tool result is truncated, the call retried
    ("Compare them.", [Overflow(), Reply("alpha and beta compared")]),
    ("Store a fact.", [CallTool("remember", {"fact": "sky is blue"}, "tu-fact"), Reply("stored", input_tokens=BIG)]),
    # the projection is over the threshold: proactive compression before this call
    ("Anything else?", [Reply("nothing else")]),
    ("Look up gamma.", [CallTool("lookup", {"key": "gamma"}, "tu-gamma"), Reply("gamma found")]),
    # two more overflows: gamma's result is truncated, then nothing is left to truncate and the window is trimmed
    ("Summarize gamma.", [Overflow(), Overflow(), Reply("gamma summarized")]),
    ("Thanks!", [Reply("You're welcome.")]),
]

SUMMARIZING_RUN: list[tuple[str, list[Step]]] = [
    ("My name is Ada. Remember it.", [Reply("Noted, Ada.")]),
    ("Look up alpha.", [CallTool("lookup", {"key": "alpha"}, "tu-alpha"), Reply("alpha found")]),
    ("Look up beta.", [CallTool("lookup", {"key": "beta"}, "tu-beta"), Reply("beta found")]),
    ("Compare them.", [Overflow(), Reply("alpha and beta compared")]),
    ("Store a fact.", [CallTool("remember", {"fact": "sky is blue"}, "tu-fact"), Reply("stored")]),
    ("Look up gamma.", [CallTool("lookup", {"key": "gamma"}, "tu-gamma"), Reply("gamma found", input_tokens=BIG)]),
    ("Anything else?", [Reply("nothing else")]),
    ("Thanks!", [Overflow(), Reply("You're welcome.")]),
]

RUNS = {"sliding": SLIDING_RUN, "summarizing": SUMMARIZING_RUN}


def play(agent: Agent, run: Sequence[tuple[str, list[Step]]]) -> None:
    model = model_of(agent)
    for prompt, steps in run:
        model.extend(steps)
        agent(prompt)
        assert model.remaining == 0, f"{prompt!r} left {model.remaining} scripted steps"


class EvictionSpy:
    """Watches ``agent.messages`` around Strands' events and notes why each message left.

    The oracle for the ledger's eviction history, built only from what Strands does:
    a message gone before the model call's manager callbacks ran was removed by a
    reactive reduction (an overflow was just reported); one gone during them by
    proactive compression (the projection reached the threshold) or per-turn
    management; one gone at the end of the invocation by end-of-invocation management.
    """

    def __init__(self) -> None:
        self.previous: list[str] = []
        self.expected: dict[str, str] = {}
        self.replaced_by: dict[str, str | None] = {}
        self.added: list[str] = []
        self.overflow = False

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(MessageAddedEvent, self._added, order=HookOrder.SDK_LAST + 1)
        registry.add_callback(BeforeModelCallEvent, self._before_first, order=HookOrder.SDK_FIRST - 1)
        registry.add_callback(BeforeModelCallEvent, self._before_last, order=HookOrder.SDK_LAST + 1)
        registry.add_callback(AfterModelCallEvent, self._after_model)
        registry.add_callback(AfterInvocationEvent, self._after_invocation, order=HookOrder.SDK_FIRST - 1)

    @staticmethod
    def _ids(agent: Agent) -> list[str]:
        return [m["tracking_id"] for m in agent.messages]

    def _observe(self, agent: Agent, trigger: str) -> None:
        now = self._ids(agent)
        gone = [i for i in self.previous if i not in now]
        summary = agent.conversation_manager.get_state().get("summary_message")
        summary_id = summary.get("tracking_id") if summary else None
        new_summary = summary_id if summary_id in now and summary_id not in self.previous else None
        for entry_id in gone:
            self.expected[entry_id] = trigger
            self.replaced_by[entry_id] = new_summary
        self.previous = now

    def _added(self, event: MessageAddedEvent) -> None:
        self.added.append(event.message["tracking_id"])
        self._observe(event.agent, "manual")

    def _before_first(self, event: BeforeModelCallEvent) -> None:
        self._observe(event.agent, "reactive" if self.overflow else "manual")
        self.overflow = False

    def _before_last(self, event: BeforeModelCallEvent) -> None:
        projected = event.projected_input_tokens
        proactive = projected is not None and projected / CONTEXT_WINDOW >= THRESHOLD
        self._observe(event.agent, "proactive" if proactive else "per_turn")

    def _after_model(self, event: AfterModelCallEvent) -> None:
        if isinstance(event.exception, ContextWindowOverflowException):
            self.overflow = True

    def _after_invocation(self, event: AfterInvocationEvent) -> None:
        self._observe(event.agent, "reactive" if self.overflow else "end_of_invocation")
        self.overflow = False


def dumps(value: Any) -> str:
    """JSON that keeps bytes (tagged), for handing agent snapshots between processes."""
    return json.dumps(encode_blocks([{"value": value}])[0])


def loads(text: str) -> Any:
    return decode_blocks([json.loads(text)])[0]["value"]


def snapshot(agent: Agent, model_call_count: int | None = None) -> dict[str, Any]:
    """What must survive a restart."""
    return {
        "messages": [dict(m) for m in agent.messages],
        "state": agent.state.get(),
        "conversation_manager": agent.conversation_manager.get_state(),
        "model_call_count": model_call_count,
    }
