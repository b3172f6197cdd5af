"""The OpenAI Agents SDK's traces as OpenTelemetry spans, with contextledger's spans inside them.

The SDK traces runs with a tracing system of its own: its spans are not OpenTelemetry
spans and never become OpenTelemetry's current span, so a commit or a reduction made
during a run would start a trace of its own. :class:`OpenTelemetryTracingProcessor` is
a tracing processor (the SDK's ``TracingProcessor`` interface): it starts one
OpenTelemetry span for each SDK trace and span -- a child of the span of the SDK parent,
and the trace's span a child of whatever OpenTelemetry span was current when the run
began -- and tells contextledger which of them is current, so the ``contextledger.*``
spans of a model call's input filter are children of that turn's span::

    from agents import add_trace_processor
    add_trace_processor(OpenTelemetryTracingProcessor())   # next to the SDK's own export
    # or set_trace_processors([OpenTelemetryTracingProcessor()]) for OpenTelemetry only

The spans go to the tracer provider contextledger uses (see
:func:`contextledger.telemetry.configure`); while none is configured the processor does
nothing. Model-call spans carry the GenAI conventions' model and token usage
(``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``);
no prompt or output content is copied.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.tracing import Span, Trace, TracingProcessor, get_current_span, get_current_trace

from contextledger.telemetry import active, add_parent_source, remove_parent_source

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span as OtelSpan

__all__ = ["OpenTelemetryTracingProcessor"]

SCOPE = "contextledger.openai_agents"

_OPERATIONS = {"agent": "invoke_agent", "function": "execute_tool", "generation": "chat", "response": "chat"}


@dataclass
class _Open:
    """The OpenTelemetry spans of one SDK trace, and the span that was current where it began."""

    span: OtelSpan
    outer_span_id: int
    spans: dict[str, OtelSpan] = field(default_factory=dict)


class OpenTelemetryTracingProcessor(TracingProcessor):
    """Mirrors the SDK's traces into OpenTelemetry and parents contextledger's spans on them.

    Thread-safe; the SDK calls it synchronously as its spans start and end. Creating
    one registers it as contextledger's parent source; :meth:`shutdown` unregisters it.
    """

    def __init__(self) -> None:
        """Start mirroring (the SDK must be given it: ``add_trace_processor``)."""
        self._lock = threading.Lock()
        self._traces: dict[str, _Open] = {}
        self._ours: set[int] = set()
        add_parent_source(self.parent_context)

    # -- the SDK's interface ------------------------------------------------------------------

    def on_trace_start(self, trace: Trace) -> None:
        """Start the trace's span under the OpenTelemetry span current here (if any)."""
        tracer = self._tracer()
        if tracer is None:
            return
        from opentelemetry.trace import get_current_span as current_otel_span

        outer = current_otel_span().get_span_context()
        span = tracer.start_span(trace.name, attributes={"openai_agents.trace_id": trace.trace_id})
        with self._lock:
            self._traces[trace.trace_id] = _Open(span, outer.span_id if outer.is_valid else 0)
            self._ours.add(span.get_span_context().span_id)

    def on_trace_end(self, trace: Trace) -> None:
        """End the trace's span (and any span of it the SDK left open)."""
        with self._lock:
            opened = self._traces.pop(trace.trace_id, None)
            if opened is None:
                return
            for span in (*opened.spans.values(), opened.span):
                self._ours.discard(span.get_span_context().span_id)
        for span in opened.spans.values():
            span.end()
        opened.span.end()

    def on_span_start(self, span: Span[Any]) -> None:
        """Start the span's mirror as a child of its SDK parent's (or of the trace's)."""
        tracer = self._tracer()
        if tracer is None:
            return
        from opentelemetry.trace import set_span_in_context

        with self._lock:
            opened = self._traces.get(span.trace_id)
            if opened is None:
                return
            parent = opened.spans.get(span.parent_id or "", opened.span)
        name, attributes = _describe(span)
        mirror = tracer.start_span(name, context=set_span_in_context(parent), attributes=attributes)
        with self._lock:
            opened.spans[span.span_id] = mirror
            self._ours.add(mirror.get_span_context().span_id)

    def on_span_end(self, span: Span[Any]) -> None:
        """End the span's mirror, with the usage and error the SDK recorded."""
        with self._lock:
            opened = self._traces.get(span.trace_id)
            mirror = opened.spans.pop(span.span_id, None) if opened is not None else None
            if mirror is None:
                return
            self._ours.discard(mirror.get_span_context().span_id)
        mirror.set_attributes(_usage(span))
        if span.error is not None:
            from opentelemetry.trace import Status, StatusCode

            mirror.set_status(Status(StatusCode.ERROR, str(span.error.get("message", ""))))
        mirror.end()

    def shutdown(self) -> None:
        """Stop being contextledger's parent source and end whatever is still open."""
        remove_parent_source(self.parent_context)
        with self._lock:
            opened = list(self._traces.values())
            self._traces.clear()
            self._ours.clear()
        for trace in opened:
            for span in trace.spans.values():
                span.end()
            trace.span.end()

    def force_flush(self) -> None:
        """Nothing is queued here (the tracer provider's processors export)."""

    # -- contextledger's parent -----------------------------------------------------------------

    def parent_context(self) -> Context | None:
        """The context of the SDK's current span's mirror, or ``None`` to keep OpenTelemetry's current.

        An OpenTelemetry span opened inside the SDK span (a tool's own span) is more
        specific and stays the parent; the span current where the run began, or one of
        the mirrors, gives way to the SDK's current span.
        """
        sdk_span, sdk_trace = get_current_span(), get_current_trace()
        if sdk_trace is None:
            return None
        with self._lock:
            opened = self._traces.get(sdk_trace.trace_id)
            if opened is None:
                return None
            mirror = opened.spans.get(sdk_span.span_id, opened.span) if sdk_span is not None else opened.span
            ours, outer = set(self._ours), opened.outer_span_id
        from opentelemetry.trace import get_current_span as current_otel_span
        from opentelemetry.trace import set_span_in_context

        current = current_otel_span().get_span_context()
        if current.is_valid and current.span_id not in ours and current.span_id != outer:
            return None
        return set_span_in_context(mirror)

    def _tracer(self) -> Any:
        tel = active()
        return None if tel is None else tel.tracer_provider.get_tracer(SCOPE)


def _describe(span: Span[Any]) -> tuple[str, dict[str, Any]]:
    data = span.span_data
    kind = data.type
    attributes: dict[str, Any] = {"openai_agents.span.type": kind, "openai_agents.span_id": span.span_id}
    operation = _OPERATIONS.get(kind)
    if operation is not None:
        attributes["gen_ai.operation.name"] = operation
    name = str(getattr(data, "name", "") or getattr(data, "agent_name", "") or "")
    if kind == "agent":
        attributes["gen_ai.agent.name"] = name
        return f"invoke_agent {name}", attributes
    if kind == "turn":
        attributes["gen_ai.agent.name"] = name
        return f"turn {getattr(data, 'turn', '')}".strip(), attributes
    if kind == "function":
        attributes["gen_ai.tool.name"] = name
        return f"execute_tool {name}", attributes
    if kind == "generation":
        model = str(getattr(data, "model", "") or "")
        if model:
            attributes["gen_ai.request.model"] = model
        return f"chat {model}".strip(), attributes
    return f"{kind} {name}".strip(), attributes


def _usage(span: Span[Any]) -> dict[str, Any]:
    """The GenAI usage attributes of a span whose data reports usage (generation, response, turn)."""
    data = span.span_data
    usage: Any = getattr(data, "usage", None)
    if usage is None:
        response = getattr(data, "response", None)
        usage = getattr(response, "usage", None)
    if usage is None:
        return {}
    found = {}
    for key, attribute in (
        ("input_tokens", "gen_ai.usage.input_tokens"),
        ("output_tokens", "gen_ai.usage.output_tokens"),
    ):
        value = usage.get(key) if isinstance(usage, dict) else getattr(usage, key, None)
        if isinstance(value, int):
            found[attribute] = value
    return found
