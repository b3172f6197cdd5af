"""The timeline chart's data: every agent of a session on one clock, as JSON for the page's script.

The chart is drawn in the browser (uPlot, shipped in the package) from what
:func:`chart_data` returns, handed over in a ``<script type="application/json">``
block -- data, never code. Agents are aligned by commit time: each reduction is placed
at the moment its commit was written, so two agents' reductions line up whatever their
own model-call counts. Between two reductions the context grew by what was appended,
so each agent's line rises from one reduction's *after* to the next one's *before* and
drops at each reduction: a saw tooth whose teeth are the reductions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contextledger.model.records import TRIGGERS, ConversationState, PinEvent, Reduction

__all__ = ["PIN_PATH", "STRATEGY_LETTERS", "AgentLine", "chart_data", "letter", "why"]

STRATEGY_LETTERS = {"sliding_window": "W", "summarizing": "S", "turn_window": "T", "tool_pair_repair": "R", "undo": "U"}
"""One letter drawn on each reduction's marker; other strategies use their first letter."""
PIN_PATH = "M5 1h6v1.5l-1 .6V7l2.5 2.5V11H8.75v3.5L8 16l-.75-1.5V11H3.5V9.5L6 7V2.1l-1-.6z"
"""The pin icon (a 16x16 SVG path): drawn by the templates and, from the same data, on the chart."""

_TRIGGER_WHY = {
    "per_turn": "the per-turn policy trimmed the view after a model call",
    "proactive": "the view was nearing the model's context window",
    "reactive": "the model rejected its input as too long",
    "end_of_invocation": "the agent's invocation ended",
    "manual": "asked for by the application",
    "import": "already out of the view in the ledger it was imported from",
}


def letter(strategy: str) -> str:
    """The letter drawn on a marker of ``strategy``."""
    return STRATEGY_LETTERS.get(strategy, (strategy[:1] or "?").upper())


def why(reduction: Reduction) -> str:
    """Why a reduction ran, in words: its error or detail when it has one, else what its trigger means.

    A ``restore`` reduction repairs a conversation a crash left mid-tool; it says what it
    did to the tool pair (its commit appended the missing result, or rewrote the
    messages it lists as revised).
    """
    if reduction.trigger == "restore":
        what = "a crash left a tool call without its result; the next write closed the pair"
        if reduction.revised:
            what += f" and removed orphan tool blocks from {len(reduction.revised)} message(s)"
        else:
            what += " with an error result"
        return what + (f" ({reduction.detail})" if reduction.detail else "")
    if reduction.error:
        return reduction.error
    if reduction.detail:
        return reduction.detail
    if reduction.restored:
        return f"undo: {len(reduction.restored)} entries made active again"
    return _TRIGGER_WHY.get(reduction.trigger, reduction.trigger)


@dataclass(frozen=True)
class AgentLine:
    """What the chart draws of one agent."""

    agent_id: str
    state: ConversationState
    tokens: int
    messages: int
    reductions: Sequence[Reduction]
    pins: Sequence[PinEvent]
    previews: Mapping[str, str]


def _t(value: datetime) -> float:
    return round(value.timestamp(), 3)


def chart_data(lines: Sequence[AgentLine]) -> dict[str, Any]:
    """The chart of every agent in ``lines``, as plain JSON values (columns of numbers and strings).

    For each agent: when it started (``start``), where it stands now (``now``: time of
    its last commit, tokens, messages, model calls), its reductions in commit order as
    columns (time, model call, tokens and messages before and after, trigger and
    strategy as indexes into the top-level lists, id, entries evicted) and its pin
    changes (time, model call, pinned or not, by whom, a preview of the entry).
    """
    triggers = [t for t in TRIGGERS if any(r.trigger == t for line in lines for r in line.reductions)]
    triggers += sorted({r.trigger for line in lines for r in line.reductions} - set(triggers))
    strategies = sorted({r.strategy for line in lines for r in line.reductions})
    trigger_index = {t: i for i, t in enumerate(triggers)}
    strategy_index = {s: i for i, s in enumerate(strategies)}
    agents = []
    for line in lines:
        rs = line.reductions
        agents.append(
            {
                "id": line.agent_id,
                "start": _t(line.state.created_at),
                "now": {
                    "t": _t(line.state.updated_at),
                    "tokens": line.tokens,
                    "messages": line.messages,
                    "calls": line.state.model_call_count,
                },
                "reductions": {
                    "t": [_t(r.created_at) for r in rs],
                    "call": [r.model_call_count for r in rs],
                    "tb": [r.tokens_before for r in rs],
                    "ta": [r.tokens_after for r in rs],
                    "mb": [r.messages_before for r in rs],
                    "ma": [r.messages_after for r in rs],
                    "trigger": [trigger_index[r.trigger] for r in rs],
                    "strategy": [strategy_index[r.strategy] for r in rs],
                    "id": [r.reduction_id for r in rs],
                    "evicted": [len(r.evicted) for r in rs],
                },
                "pins": {
                    "t": [_t(p.at) for p in line.pins],
                    "call": [p.from_call for p in line.pins],
                    "pinned": [p.pinned for p in line.pins],
                    "by": [p.source for p in line.pins],
                    "text": [line.previews.get(p.entry_id) or p.entry_id for p in line.pins],
                },
            }
        )
    return {
        "agents": agents,
        "triggers": triggers,
        "strategies": strategies,
        "letters": [letter(s) for s in strategies],
        "pin": PIN_PATH,
    }
