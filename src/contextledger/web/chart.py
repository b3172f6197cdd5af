"""The context-size chart: model calls on the x axis, tokens and messages on two panels.

Pure geometry: :func:`build_chart` turns reductions (each with its size before and
after, at the model call it ran) and the live view's size into points and markers in
SVG user units; the template only draws them. Between two reductions the context grew
by what was appended, so the line rises from one reduction's *after* to the next one's
*before* and drops at each reduction: a saw tooth whose teeth are the reductions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from contextledger.records import Reduction

__all__ = ["STRATEGY_MARKS", "Chart", "Marker", "Panel", "build_chart", "nice_ticks"]

WIDTH = 760
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 14, 30
PANEL_GAP = 26
PANELS = (("tokens", 170), ("messages", 100))
STRATEGY_MARKS = {"sliding_window": "W", "summarizing": "S", "turn_window": "T", "tool_pair_repair": "R"}
"""One letter drawn on each reduction's marker; other strategies use their first letter."""


@dataclass(frozen=True)
class Marker:
    """One reduction drawn on a panel: a drop from ``y_before`` to ``y_after`` at ``x``."""

    x: float
    y_before: float
    y_after: float
    trigger: str
    strategy: str
    letter: str
    title: str
    reduction_id: str


@dataclass(frozen=True)
class Panel:
    """One panel (tokens or messages): its frame, axis ticks, line and markers."""

    name: str
    top: float
    height: float
    y_ticks: tuple[tuple[float, str], ...]
    path: str
    markers: tuple[Marker, ...]
    last: tuple[float, float]


@dataclass(frozen=True)
class Chart:
    """The whole SVG: size, x ticks, panels, and the triggers and strategies it shows."""

    width: int
    height: int
    left: int
    right: int
    x_ticks: tuple[tuple[float, str], ...]
    panels: tuple[Panel, ...]
    triggers: tuple[str, ...]
    strategies: tuple[tuple[str, str], ...]
    calls: int
    reductions: int


def nice_ticks(maximum: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``maximum`` (1, 2 or 5 times a power of ten apart)."""
    if maximum <= 0:
        return [0.0, 1.0]
    raw = maximum / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    top = math.ceil(maximum / step) * step
    return [i * step for i in range(round(top / step) + 1)]


def _label(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def build_chart(reductions: Sequence[Reduction], calls: int, tokens_now: int, messages_now: int) -> Chart:
    """Lay out the chart of one agent's conversation.

    Args:
        reductions: The agent's reductions in commit order.
        calls: Model calls made so far (the right end of the x axis).
        tokens_now: Estimated tokens of the live view.
        messages_now: Entries in the live view.
    """
    last_call = max([calls, *(r.model_call_count for r in reductions)], default=0)
    x_ticks_values = nice_ticks(max(last_call, 1), 6)
    x_max = x_ticks_values[-1]
    plot_width = WIDTH - LEFT - RIGHT

    # Reductions at one model call stand a little apart so each marker stays visible.
    at_call: dict[int, int] = {}
    xs: list[float] = []
    spread = min(0.35, x_max / 60)
    for r in reductions:
        k = at_call.get(r.model_call_count, 0)
        at_call[r.model_call_count] = k + 1
        xs.append(r.model_call_count + k * spread)

    def x_of(value: float) -> float:
        return round(LEFT + plot_width * min(value, x_max) / x_max, 1)

    panels = []
    top = float(TOP)
    for name, height in PANELS:
        before = [r.tokens_before if name == "tokens" else r.messages_before for r in reductions]
        after = [r.tokens_after if name == "tokens" else r.messages_after for r in reductions]
        now = tokens_now if name == "tokens" else messages_now
        y_values = nice_ticks(max([now, *before, *after, 1]), 4)
        y_max = y_values[-1]

        def y_of(value: float, top: float = top, height: int = height, y_max: float = y_max) -> float:
            return round(top + height - height * value / y_max, 1)

        points = [(x_of(0), y_of(0))]
        markers = []
        for r, x, b, a in zip(reductions, xs, before, after, strict=True):
            points += [(x_of(x), y_of(b)), (x_of(x), y_of(a))]
            letter = STRATEGY_MARKS.get(r.strategy, (r.strategy[:1] or "?").upper())
            unit = "tokens" if name == "tokens" else "messages"
            markers.append(
                Marker(
                    x=x_of(x),
                    y_before=y_of(b),
                    y_after=y_of(a),
                    trigger=r.trigger,
                    strategy=r.strategy,
                    letter=letter,
                    title=f"call {r.model_call_count}: {r.trigger} · {r.strategy} · {b}→{a} {unit}",
                    reduction_id=r.reduction_id,
                )
            )
        points.append((x_of(max(last_call, xs[-1] if xs else 0)), y_of(now)))
        path = "M" + " L".join(f"{px},{py}" for px, py in points)
        panels.append(
            Panel(
                name=name,
                top=top,
                height=height,
                y_ticks=tuple((y_of(v), _label(v)) for v in y_values),
                path=path,
                markers=tuple(markers),
                last=points[-1],
            )
        )
        top += height + PANEL_GAP
    strategies = sorted({r.strategy for r in reductions})
    return Chart(
        width=WIDTH,
        height=round(top - PANEL_GAP + BOTTOM),
        left=LEFT,
        right=WIDTH - RIGHT,
        x_ticks=tuple((x_of(v), _label(v)) for v in x_ticks_values),
        panels=tuple(panels),
        triggers=tuple(sorted({r.trigger for r in reductions})),
        strategies=tuple((STRATEGY_MARKS.get(s, (s[:1] or "?").upper()), s) for s in strategies),
        calls=calls,
        reductions=len(reductions),
    )
