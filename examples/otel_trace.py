"""A Strands agent on a ledger, traced with OpenTelemetry: reductions inside the agent's turns.

    python examples/otel_trace.py                                  # spans printed by the console exporter
    python examples/otel_trace.py --otlp http://127.0.0.1:4318     # sent to a local collector (OTLP over HTTP)
    python examples/otel_trace.py --png docs/trace.png             # and drawn as a waterfall

Offline: the agent plays a scripted model. Strands traces to the global tracer provider,
and contextledger's spans (``contextledger.commit``, ``.reduction``, ``.restore``,
``.summarize``) start inside the span current where their work runs, so a per-turn
reduction is a child of the Strands cycle span of the model call it prepared. ``--otlp``
needs ``opentelemetry-exporter-otlp-proto-http``; ``--png`` needs matplotlib.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def run_agent(directory: Path, turns: int) -> None:
    """Play ``turns`` turns of a scripted Strands agent whose session lives in a SQLite ledger."""
    from strands import Agent

    from contextledger import Ledger
    from contextledger.integrations.strands import (
        LedgerSessionManager,
        Reply,
        ScriptedModel,
        StrandsConversationManager,
    )
    from contextledger.managers import SlidingWindowConversationManager

    with Ledger.connect(f"sqlite:///{directory}/agent.db") as ledger:
        model = ScriptedModel()
        manager = SlidingWindowConversationManager(window_size=4, per_turn=True)
        agent = Agent(
            model=model,
            callback_handler=None,
            session_manager=LedgerSessionManager("traced", ledger=ledger),
            conversation_manager=StrandsConversationManager(manager),
        )
        for n in range(turns):
            model.extend([Reply(f"answer {n}")])
            agent(f"question {n}")


def waterfall(spans: Sequence[ReadableSpan], path: Path) -> None:
    """Draw the last agent invocation's trace: one bar per span, indented by depth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    last = [s for s in spans if s.name.startswith("invoke_agent")][-1]
    members = [s for s in spans if s.context.trace_id == last.context.trace_id]
    by_id = {s.context.span_id: s for s in members}

    def depth(span: ReadableSpan) -> int:
        parent = by_id.get(span.parent.span_id) if span.parent is not None else None
        return 0 if parent is None else depth(parent) + 1

    members.sort(key=lambda s: (s.start_time or 0, depth(s)))
    origin = min(s.start_time or 0 for s in members)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(members) + 1.2))
    for row, span in enumerate(members):
        start = ((span.start_time or 0) - origin) / 1e6
        width = max(((span.end_time or 0) - (span.start_time or 0)) / 1e6, 0.02)
        ours = span.name.startswith("contextledger.")
        color = {"contextledger.reduction": "#d62728", "contextledger.commit": "#ff7f0e"}.get(span.name, "#1f77b4")
        ax.barh(row, width, left=start, color=color if ours else "#9ecae1", edgecolor="black", linewidth=0.4)
        label = span.name
        if span.name == "contextledger.reduction":
            attributes = span.attributes or {}
            trigger = attributes.get("contextledger.reduction.trigger")
            if attributes.get("contextledger.reduction.outcome") == "committed":
                strategy, evicted = (attributes.get(f"contextledger.reduction.{k}") for k in ("strategy", "evicted"))
                label += f"  ({trigger}, {strategy}, evicted {evicted})"
            else:
                label += f"  ({trigger}: nothing to reduce)"
        ax.text(start + width + 0.05, row, "    " * depth(span) + label, va="center", fontsize=8)
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds since the agent was invoked")
    ax.set_title("One Strands agent turn: contextledger's reduction and commits inside the agent's spans", fontsize=10)
    ax.margins(x=0.6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """Configure the tracer provider (console or OTLP), run the agent, draw the picture."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--otlp", help="send the spans to this OTLP/HTTP collector (e.g. http://127.0.0.1:4318)")
    parser.add_argument("--png", type=Path, help="draw the last turn's trace as a waterfall here")
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    provider = TracerProvider(resource=Resource.create({"service.name": "contextledger-example"}))
    if args.otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{args.otlp}/v1/traces")))
    else:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    trace.set_tracer_provider(provider)

    with tempfile.TemporaryDirectory() as directory:
        run_agent(Path(directory), args.turns)
    provider.force_flush()
    if args.png:
        waterfall(kept.get_finished_spans(), args.png)


if __name__ == "__main__":
    main()
