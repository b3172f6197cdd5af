"""Run a Strands agent with contextledger under a global tracer provider; print the spans as JSON.

A child process of ``test_hosts.py``: Strands only traces to the global provider, which a
process can set once, so the test suite's own process keeps it unset.
"""

from __future__ import annotations

import json
import sys
import warnings

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def main() -> None:
    warnings.simplefilter("ignore")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    from strands import Agent

    from contextledger import Ledger
    from contextledger.integrations.strands import (
        LedgerSessionManager,
        Reply,
        ScriptedModel,
        StrandsConversationManager,
    )
    from contextledger.managers import SlidingWindowConversationManager

    with Ledger.connect(sys.argv[1]) as ledger:
        model = ScriptedModel()
        agent = Agent(
            model=model,
            callback_handler=None,
            session_manager=LedgerSessionManager("strands-otel", ledger=ledger),
            conversation_manager=StrandsConversationManager(
                SlidingWindowConversationManager(window_size=4, per_turn=True)
            ),
        )
        for n in range(4):
            model.extend([Reply(f"answer {n}")])
            agent(f"question {n}")
    spans = [
        {
            "name": s.name,
            "trace_id": s.context.trace_id,
            "span_id": s.context.span_id,
            "parent_id": s.parent.span_id if s.parent is not None else None,
            "attributes": {k: v for k, v in (s.attributes or {}).items() if isinstance(v, (str, int, bool))},
        }
        for s in exporter.get_finished_spans()
    ]
    print(json.dumps(spans))


if __name__ == "__main__":
    main()
