"""Log lines keep their shape; the filter and the formatter add the ids of the current span."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from contextledger import Conversation, Message, telemetry
from contextledger.managers import SlidingWindowConversationManager
from contextledger.stores.memory import MemoryStore
from tests.telemetry.conftest import Recorded

LINE = (
    "session_id=<logs>, agent_id=<default>, trigger=<manual>, strategy=<sliding_window>, evicted=<2>, revised=<0>"
    " | committed reduction"
)


@pytest.fixture
def captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    plain, fielded = io.StringIO(), io.StringIO()
    with_filter = logging.StreamHandler(plain)
    with_filter.addFilter(telemetry.TraceContextFilter())
    with_filter.setFormatter(logging.Formatter("%(trace_id)s/%(span_id)s %(message)s"))
    with_formatter = logging.StreamHandler(fielded)
    with_formatter.setFormatter(telemetry.TraceContextFormatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("contextledger")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(with_filter)
    logger.addHandler(with_formatter)
    yield plain, fielded
    logger.removeHandler(with_filter)
    logger.removeHandler(with_formatter)
    logger.setLevel(level)


def reduce_once() -> None:
    chat = Conversation(MemoryStore(), "logs", manager=SlidingWindowConversationManager(window_size=2))
    chat.append(Message.user("q0"), Message.assistant("a0"), Message.user("q1"))
    chat.reduce()


def test_the_ids_of_the_reduction_span_are_on_its_log_line(
    otel: Recorded, captured: tuple[io.StringIO, io.StringIO]
) -> None:
    reduce_once()
    [span] = otel.spans("contextledger.reduction")
    trace_id, span_id = f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"
    plain, fielded = (stream.getvalue().strip() for stream in captured)
    assert plain == f"{trace_id}/{span_id} {LINE}"
    assert fielded == (
        f"INFO trace_id=<{trace_id}>, span_id=<{span_id}>, session_id=<logs>, agent_id=<default>, trigger=<manual>,"
        " strategy=<sliding_window>, evicted=<2>, revised=<0> | committed reduction"
    )


def test_without_a_span_the_lines_are_as_they_were(captured: tuple[io.StringIO, io.StringIO]) -> None:
    reduce_once()
    plain, fielded = (stream.getvalue().strip() for stream in captured)
    assert plain == f"/ {LINE}"
    assert fielded == f"INFO {LINE}"


def test_a_line_without_fields_gets_the_ids_as_its_fields(otel: Recorded) -> None:
    formatter = telemetry.TraceContextFormatter("%(message)s")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "plain %s", ("words",), None)
    with otel.tracer_provider.get_tracer("t").start_as_current_span("outer") as span:
        line = formatter.format(record)
    ids = span.get_span_context()
    assert line == f"trace_id=<{ids.trace_id:032x}>, span_id=<{ids.span_id:016x}> | plain words"
    assert record.getMessage() == "plain words"  # the record other handlers see is unchanged
