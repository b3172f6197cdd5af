"""Trace and span ids on contextledger's structured log lines, for a user to install.

The lines themselves do not change: ``key=<value>`` fields, ``|``, what happened. A
:class:`TraceContextFilter` on a handler gives every record ``trace_id`` and ``span_id``
attributes (also under the names OpenTelemetry's logging instrumentation uses,
``otelTraceID`` and ``otelSpanID``) for a format string to show; a
:class:`TraceContextFormatter` writes them as the first two fields of the line when a
span is current, and leaves the line exactly as it was when none is.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["TraceContextFilter", "TraceContextFormatter", "current_ids"]


def current_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the span current here, or ``None`` (none, or no OpenTelemetry API)."""
    try:
        from opentelemetry.trace import get_current_span
    except ImportError:  # pragma: no cover - the otel extra is not installed
        return None
    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


class TraceContextFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (hex; empty when no span is current) to every record it sees.

    Install it on a handler (``handler.addFilter(TraceContextFilter())``) and use
    ``%(trace_id)s`` / ``%(span_id)s`` in that handler's format. It never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Set the ids on ``record``; always ``True``."""
        ids = current_ids()
        trace_id, span_id = ids if ids is not None else ("", "")
        record.trace_id = record.otelTraceID = trace_id
        record.span_id = record.otelSpanID = span_id
        return True


class TraceContextFormatter(logging.Formatter):
    """A formatter that puts ``trace_id=<...>, span_id=<...>`` first in a structured line when a span is current.

    ``session_id=<s> | committed reduction`` becomes
    ``trace_id=<4bf9...>, span_id=<00f0...>, session_id=<s> | committed reduction``; a line
    without ``key=<value>`` fields gets them as its fields (``trace_id=<...>, span_id=<...> |
    message``). Takes the arguments of :class:`logging.Formatter`.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record`` with the ids of the current span in front of its fields."""
        ids = current_ids()
        if ids is None:
            return super().format(record)
        fields = f"trace_id=<{ids[0]}>, span_id=<{ids[1]}>"
        message = record.getMessage()
        structured = " | " in message and message.split(" | ", 1)[0].endswith(">")
        copy: Any = logging.makeLogRecord(record.__dict__)
        copy.msg = f"{fields}, {message}" if structured else f"{fields} | {message}"
        copy.args = None
        return super().format(copy)
