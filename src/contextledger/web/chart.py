"""The context-size chart: model calls on the x axis, tokens and messages on two panels.

Pure geometry: :func:`build_chart` turns reductions (each with its size before and
after, at the model call it ran) and the live view's size into points and markers in
SVG user units; the template only draws them. Between two reductions the context grew
by what was appended, so the line rises from one reduction's *after* to the next one's
*before* and drops at each reduction: a saw tooth whose teeth are the reductions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from contextledger.records import PinEvent, Reduction

__all__ = ["MAX_MARKERS", "STRATEGY_MARKS", "Chart", "Marker", "Panel", "build_chart", "nice_ticks", "render_svg"]

MAX_MARKERS = 240
"""More reductions than this are drawn in groups of consecutive ones (one marker a group)."""
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
class PinMark:
    """One pin change drawn under the tokens panel at the first model call it affected."""

    x: float
    pinned: bool
    title: str


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
    grouped: int = 1
    pins: tuple[PinMark, ...] = ()

    def svg(self, href: str, label: str) -> str:
        """The chart as an SVG element; each marker links to ``href`` + ``#r-<reduction id>``."""
        return render_svg(self, href, label)


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


@dataclass(frozen=True)
class _Group:
    """Consecutive reductions drawn as one marker (one reduction when there are few)."""

    members: tuple[Reduction, ...]

    @property
    def first(self) -> Reduction:
        return self.members[0]

    @property
    def call(self) -> float:
        return (self.members[0].model_call_count + self.members[-1].model_call_count) / 2

    def before(self, name: str) -> int:
        return max(r.tokens_before if name == "tokens" else r.messages_before for r in self.members)

    def after(self, name: str) -> int:
        return min(r.tokens_after if name == "tokens" else r.messages_after for r in self.members)

    @property
    def trigger(self) -> str:
        triggers = [r.trigger for r in self.members]
        # The rarest trigger of a group is the one worth seeing (a reactive among per-turn trims).
        return min(dict.fromkeys(triggers), key=triggers.count)

    @property
    def strategy(self) -> str:
        strategies = [r.strategy for r in self.members]
        return max(dict.fromkeys(strategies), key=strategies.count)

    def title(self, name: str) -> str:
        unit = "tokens" if name == "tokens" else "messages"
        if len(self.members) == 1:
            r = self.first
            return (
                f"call {r.model_call_count}: {r.trigger} · {r.strategy} · {self.before(name)}→{self.after(name)} {unit}"
            )
        counts: dict[str, int] = {}
        for r in self.members:
            counts[f"{r.trigger} · {r.strategy}"] = counts.get(f"{r.trigger} · {r.strategy}", 0) + 1
        kinds = ", ".join(f"{n}× {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        return (
            f"calls {self.first.model_call_count}–{self.members[-1].model_call_count}: "
            f"{len(self.members)} reductions ({kinds}) · {self.before(name)}→{self.after(name)} {unit}"
        )


def _groups(reductions: Sequence[Reduction]) -> list[_Group]:
    size = max(1, -(-len(reductions) // MAX_MARKERS))
    return [_Group(tuple(reductions[i : i + size])) for i in range(0, len(reductions), size)]


def build_chart(
    reductions: Sequence[Reduction],
    calls: int,
    tokens_now: int,
    messages_now: int,
    pins: Sequence[PinEvent] = (),
    previews: Mapping[str, str] | None = None,
) -> Chart:
    """Lay out the chart of one agent's conversation.

    At most :data:`MAX_MARKERS` markers are drawn: beyond that, consecutive reductions
    share one marker (its drop spans the highest *before* and the lowest *after* of the
    group, its colour is the group's rarest trigger, its title counts the members).

    Args:
        reductions: The agent's reductions in commit order.
        calls: Model calls made so far (the right end of the x axis).
        tokens_now: Estimated tokens of the live view.
        messages_now: Entries in the live view.
        pins: The agent's pin changes; each is drawn at the first model call whose input
            it changed (``PinEvent.from_call``).
        previews: Short texts of the pinned entries, for the pin marks' titles.
    """
    groups = _groups(reductions)
    last_call = max([calls, *(r.model_call_count for r in reductions)], default=0)
    x_ticks_values = nice_ticks(max(last_call, 1), 6)
    x_max = x_ticks_values[-1]
    plot_width = WIDTH - LEFT - RIGHT

    # Reductions at one model call stand a little apart so each marker stays visible.
    at_call: dict[float, int] = {}
    xs: list[float] = []
    spread = min(0.35, x_max / 60)
    for g in groups:
        k = at_call.get(g.call, 0)
        at_call[g.call] = k + 1
        xs.append(g.call + k * spread)

    def x_of(value: float) -> float:
        return round(LEFT + plot_width * min(value, x_max) / x_max, 1)

    panels = []
    top = float(TOP)
    for name, height in PANELS:
        before = [g.before(name) for g in groups]
        after = [g.after(name) for g in groups]
        now = tokens_now if name == "tokens" else messages_now
        y_values = nice_ticks(max([now, *before, *after, 1]), 4)
        y_max = y_values[-1]

        def y_of(value: float, top: float = top, height: int = height, y_max: float = y_max) -> float:
            return round(top + height - height * value / y_max, 1)

        points = [(x_of(0), y_of(0))]
        markers = []
        for g, x, b, a in zip(groups, xs, before, after, strict=True):
            points += [(x_of(x), y_of(b)), (x_of(x), y_of(a))]
            markers.append(
                Marker(
                    x=x_of(x),
                    y_before=y_of(b),
                    y_after=y_of(a),
                    trigger=g.trigger,
                    strategy=g.strategy,
                    letter=STRATEGY_MARKS.get(g.strategy, (g.strategy[:1] or "?").upper()),
                    title=g.title(name),
                    reduction_id=g.first.reduction_id,
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
    texts = previews or {}
    pin_marks = tuple(
        PinMark(
            x=x_of(p.from_call),
            pinned=p.pinned,
            title=f"call {p.from_call}: {'pinned' if p.pinned else 'unpinned'} by {p.source}: "
            + (texts.get(p.entry_id) or p.entry_id),
        )
        for p in pins
    )
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
        grouped=len(groups[0].members) if groups else 1,
        pins=pin_marks,
    )


def render_svg(chart: Chart, href: str, label: str) -> str:
    """Draw ``chart`` as SVG markup (built here rather than in a template: thousands of elements, fast)."""
    out = [f'<svg viewBox="0 0 {chart.width} {chart.height}" role="img" aria-label="{escape(label)}" class="timeline">']
    link = escape(href)
    for panel in chart.panels:
        out.append(f'<g class="panel {panel.name}">')
        for y, text in panel.y_ticks:
            out.append(f'<line class="grid" x1="{chart.left}" x2="{chart.right}" y1="{y}" y2="{y}"/>')
            out.append(f'<text class="tick" x="{chart.left - 6}" y="{y + 4}" text-anchor="end">{text}</text>')
        out.append(f'<text class="axis-name" x="{chart.left + 6}" y="{panel.top + 12}">{panel.name} in context</text>')
        out.append(f'<path class="series" d="{panel.path}"/>')
        tokens = panel.name == "tokens"
        for m in panel.markers:
            out.append(
                f'<a href="{link}#r-{m.reduction_id}" class="marker-link"><g class="marker t-{escape(m.trigger)}">'
                f"<title>{escape(m.title)}</title>"
                f'<line class="drop" x1="{m.x}" x2="{m.x}" y1="{m.y_before}" y2="{m.y_after}"/>'
            )
            if tokens:
                out.append(
                    f'<circle cx="{m.x}" cy="{m.y_before}" r="7"/>'
                    f'<text x="{m.x}" y="{m.y_before + 3.5}" text-anchor="middle">{escape(m.letter)}</text>'
                )
            else:
                out.append(f'<circle cx="{m.x}" cy="{m.y_after}" r="3"/>')
            out.append("</g></a>")
        out.append(f'<circle class="now" cx="{panel.last[0]}" cy="{panel.last[1]}" r="4"><title>now</title></circle>')
        if tokens:
            base = panel.top + panel.height - 6
            for pin in chart.pins:  # small diamonds along the bottom: filled pinned, hollow unpinned
                kind = "pinned" if pin.pinned else "unpinned"
                out.append(
                    f'<g class="pin-mark {kind}"><title>{escape(pin.title)}</title>'
                    f'<path d="M{pin.x},{base - 5} l5,5 l-5,5 l-5,-5 z"/></g>'
                )
        out.append("</g>")
    for x, text in chart.x_ticks:
        out.append(f'<text class="tick" x="{x}" y="{chart.height - 10}" text-anchor="middle">{text}</text>')
    axis = f'x="{chart.right}" y="{chart.height - 10}" text-anchor="end" dy="-12"'
    out.append(f'<text class="axis-name" {axis}>model calls →</text>')
    out.append("</svg>")
    return "".join(out)
