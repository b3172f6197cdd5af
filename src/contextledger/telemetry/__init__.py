"""OpenTelemetry spans and metrics for commits, reductions, restores and summaries.

Needs only ``opentelemetry-api`` (``pip install 'contextledger[otel]'``); the application
brings the SDK and its exporters. Nothing is recorded, and the hot paths pay one check,
until a tracer or meter provider is configured -- globally by the application or by a
host such as Strands, or for contextledger alone with :func:`configure`.

Spans (each current while its work runs, so they nest in the host's trace):

* ``contextledger.commit`` -- one changeset sent to the store: backend, session
  (``gen_ai.conversation.id``), agent (``gen_ai.agent.name``), the version it produced,
  entries appended and evicted, the re-plans before it (``contextledger.commit.retries``),
  a conflict, an outcome left unknown, and how a lost reply or an unknown outcome was settled;
* ``contextledger.reduction`` -- a reduction planned and committed: trigger, strategy,
  messages and tokens before and after, entries evicted, the summary id, the reason;
* ``contextledger.restore`` -- the state and active view read: entries and bytes;
* ``contextledger.summarize`` -- the summarizer's one call (content only on opt-in).

Metrics: see :class:`~contextledger.telemetry.state.Telemetry`. Log lines get the ids of
the current span with :class:`TraceContextFilter` or :class:`TraceContextFormatter`.
"""

from __future__ import annotations

from contextledger.telemetry.logs import TraceContextFilter, TraceContextFormatter, current_ids
from contextledger.telemetry.state import (
    CAPTURE_CONTENT_ENV,
    SCOPE,
    Telemetry,
    active,
    add_parent_source,
    configure,
    remove_parent_source,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "SCOPE",
    "Telemetry",
    "TraceContextFilter",
    "TraceContextFormatter",
    "active",
    "add_parent_source",
    "configure",
    "current_ids",
    "remove_parent_source",
]
