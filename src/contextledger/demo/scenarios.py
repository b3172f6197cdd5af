"""The demo's scripted agents: what each user asks, which tools the model calls, what it answers.

Everything here is deterministic: the same scenario, turn and step always produce the
same text, so a demo run can be checked and repeated. Nothing calls a real model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contextledger.managers import (
    ConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)

__all__ = ["SCENARIOS", "Scenario", "ToolCall", "TurnScript", "tool_output"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call a scripted reply makes.

    Attributes:
        name: The tool's name.
        input: The tool input; for ``pin_message`` the index is resolved when the model
            replies (``target`` names what to pin).
        target: For ``pin_message``: ``latest_result`` (the newest tool result).
    """

    name: str
    input: dict[str, Any]
    target: str | None = None


@dataclass(frozen=True)
class TurnScript:
    """One user turn: the prompt, the tool calls the model makes in order, its final answer."""

    prompt: str
    tools: tuple[ToolCall, ...]
    answer: str


@dataclass(frozen=True)
class Scenario:
    """A kind of agent the demo runs, with the manager policy it uses.

    Attributes:
        name: Scenario key (stored in the conversation's agent state).
        agent_id: The agent id used in the ledger.
        title: One line for the report.
        policy: How the manager is configured (class name without the
            ``ConversationManager`` suffix), for the report.
        manager: Builds a fresh manager (a new one after the restart).
        context_window_limit: The window given to ``before_model_call``.
        model_window: Tokens above which the scripted model rejects the input with a
            context-window overflow (the reactive path).
        script: The turn script for a 1-based turn number.
        pin_first: Whether the host pins the first user message (the task's constraints).
    """

    name: str
    agent_id: str
    title: str
    policy: str
    manager: Callable[[], ConversationManager]
    context_window_limit: int
    model_window: int
    script: Callable[[int], TurnScript]
    pin_first: bool = False


# -- content generators ---------------------------------------------------------------------

_CITIES = ["Lisbon", "Porto", "Sintra", "Cascais", "Évora", "Coimbra", "Lagos", "Braga"]
_TOPICS = [
    "hotel near Alfama",
    "tram 28 timetable",
    "vegetarian dinner",
    "fado evening",
    "day trip by train",
    "museum passes",
    "beach afternoon",
    "airport transfer",
    "rainy-day plan",
    "bakery crawl",
]


def _trip(turn: int) -> TurnScript:
    topic = _TOPICS[(turn - 1) % len(_TOPICS)]
    city = _CITIES[(turn - 1) % len(_CITIES)]
    if turn == 1:
        return TurnScript(
            prompt=(
                "[turn 1] Plan a five-day trip to Portugal for two in May. Hard constraints: total budget "
                "2,400 EUR, vegetarian food only, no departures before 9am. Keep these in mind all along."
            ),
            tools=(ToolCall("search", {"query": "Lisbon five day itinerary May vegetarian"}),),
            answer=(
                "Noted: 2,400 EUR for two, vegetarian, nothing before 9am. I will base the trip in Lisbon "
                "with two day trips, and keep a running budget as we go."
            ),
        )
    tools: list[ToolCall] = [ToolCall("search", {"query": f"{city} {topic} prices May"})]
    if turn % 6 == 2:
        tools.append(ToolCall("pin_message", {"action": "pin"}, target="latest_result"))
    return TurnScript(
        prompt=f"[turn {turn}] What do you suggest for a {topic} in {city}? Stay within the constraints.",
        tools=tuple(tools),
        answer=(
            f"For the {topic} in {city} I picked the option that fits the budget and the vegetarian rule; "
            f"running total after turn {turn}: {600 + 115 * turn} EUR of 2,400 EUR."
        ),
    )


def _support(turn: int) -> TurnScript:
    order = f"A-{1040 + turn}"
    if turn == 1:
        return TurnScript(
            prompt=(
                "[turn 1] Hi, I am Dana from Keller GmbH, account 7731. Several of our orders arrived "
                "damaged and we want replacements, not refunds."
            ),
            tools=(ToolCall("lookup_account", {"account": "7731"}),),
            answer="Thanks Dana. I found account 7731 (Keller GmbH, priority support). Which orders are affected?",
        )
    return TurnScript(
        prompt=f"[turn {turn}] Order {order} is also damaged: two of the six lamps have cracked shades.",
        tools=(ToolCall("lookup_order", {"order": order}),),
        answer=(
            f"I see order {order}: six lamps, shipped from Leipzig. I have opened a replacement for the two "
            f"cracked ones (ticket RMA-{7000 + turn}); they ship within three working days."
        ),
    )


_SERVICES = ["checkout", "payments", "search", "auth", "inventory"]


def _triage(turn: int) -> TurnScript:
    service = _SERVICES[(turn - 1) % len(_SERVICES)]
    if turn == 1:
        return TurnScript(
            prompt=(
                "[turn 1] Incident INC-2291: p95 latency of the storefront doubled since 14:05 UTC. "
                "Find the cause, service by service."
            ),
            tools=(ToolCall("read_logs", {"service": "gateway", "minutes": 30}),),
            answer="The gateway itself is healthy; its upstream calls are slow. I will go through the services.",
        )
    return TurnScript(
        prompt=f"[turn {turn}] Check the {service} service next.",
        tools=(ToolCall("read_logs", {"service": service, "minutes": 30}),),
        answer=(
            f"{service}: error rate normal, but connection-pool waits grew from 3 ms to 240 ms after the "
            f"14:05 deploy. Likely related; noting it and moving on."
        ),
    )


_REVIEW_FILES = ["ledger.py", "conversation.py", "view.py", "hooks.py", "records.py", "tokens.py"]


def _review(turn: int) -> TurnScript:
    path = _REVIEW_FILES[(turn - 1) % len(_REVIEW_FILES)]
    return TurnScript(
        prompt=f"[turn {turn}] Review {path} for error handling and tell me the one change you would make.",
        tools=(ToolCall("read_file", {"path": path}),),
        answer=f"In {path} I would wrap the driver call and re-raise a typed error with the original chained.",
    )


def tool_output(call: ToolCall, turn: int) -> str:
    """The deterministic text a demo tool returns."""
    if call.name == "search":
        query = call.input.get("query", "")
        lines = [f"Results for {query!r}:"]
        for rank in range(1, 5):
            lines.append(
                f"{rank}. {query.title()} option {rank} — rated {4.1 + rank / 10:.1f}, from {40 + 25 * rank} EUR; "
                f"open 10:00-22:00; vegetarian menu available; booking recommended two days ahead."
            )
        return "\n".join(lines)
    if call.name == "lookup_account":
        return json.dumps(
            {
                "account": call.input.get("account"),
                "company": "Keller GmbH",
                "tier": "priority",
                "contact": "Dana",
                "open_tickets": 0,
                "orders_last_90_days": 14,
                "notes": "prefers replacements over refunds",
            },
        )
    if call.name == "lookup_order":
        order = call.input.get("order")
        items = [
            {"sku": f"LMP-{200 + i}", "name": f"Pendant lamp model {i}", "qty": 1, "status": "delivered"}
            for i in range(6)
        ]
        return json.dumps({"order": order, "carrier": "DHL", "shipped_from": "Leipzig", "items": items})
    if call.name == "read_logs":
        service = call.input.get("service", "svc")
        lines = []
        for minute in range(16):
            wait = 3 if minute < 5 else 40 * (minute - 4)
            lines.append(
                f"14:{minute:02d}:17Z {service} INFO request_id=r{turn:02d}{minute:03d} route=/api/{service} "
                f"status=200 pool_wait_ms={wait} db_ms={12 + minute}"
            )
        return "\n".join(lines)
    if call.name == "read_file":
        path = call.input.get("path", "module.py")
        body = "\n".join(f"    line {n}: try: driver.call() except Exception: pass  # {path}" for n in range(12))
        return f"# {path}\n{body}"
    return f"unknown tool {call.name}"


def _sliding_trip() -> ConversationManager:
    return SlidingWindowConversationManager(window_size=10, per_turn=True)


def _summarizing_support() -> ConversationManager:
    return SummarizingConversationManager(
        summary_ratio=0.5,
        preserve_recent_messages=4,
        proactive_compression={"compression_threshold": 0.6},
        protected_messages={"first": 1},
    )


def _sliding_triage() -> ConversationManager:
    return SlidingWindowConversationManager(window_size=40, should_truncate_results=True, truncate_threshold=600)


def _turn_window_review() -> ConversationManager:
    return TurnWindowConversationManager(max_user_turns=3)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        name="trip",
        agent_id="planner",
        title="trip planner: per-turn trimming, pinned constraints, the pin_message tool",
        policy="SlidingWindow(window_size=10, per_turn=True)",
        manager=_sliding_trip,
        context_window_limit=8000,
        model_window=8000,
        script=_trip,
        pin_first=True,
    ),
    Scenario(
        name="support",
        agent_id="support",
        title="support desk: proactive summaries by the offline summarizer",
        policy=(
            "Summarizing(summary_ratio=0.5, preserve_recent_messages=4, "
            "proactive_compression={'compression_threshold': 0.6}, protected_messages={'first': 1})"
        ),
        manager=_summarizing_support,
        context_window_limit=2000,
        model_window=4000,
        script=_support,
    ),
    Scenario(
        name="triage",
        agent_id="triage",
        title="incident triage: big tool results, overflows handled reactively, a crash mid-tool",
        policy="SlidingWindow(window_size=40, truncate_threshold=600)",
        manager=_sliding_triage,
        context_window_limit=2400,
        model_window=2400,
        script=_triage,
    ),
    Scenario(
        name="review",
        agent_id="reviewer",
        title="code review: keep the last three user turns",
        policy="TurnWindow(max_user_turns=3)",
        manager=_turn_window_review,
        context_window_limit=8000,
        model_window=8000,
        script=_review,
    ),
)
"""The scenarios, in the order sessions are created (cycled for more sessions)."""
