"""Off costs nothing but the check: no tracer is asked for a span, no clock is read, nothing is built."""

from __future__ import annotations

import time
from typing import Any

import pytest
from opentelemetry import trace

from contextledger import Conversation, Message, telemetry
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager
from contextledger.stores.memory import MemoryStore
from tests.telemetry.conftest import Recorded


def exercise() -> None:
    store = MemoryStore()
    chat = Conversation(
        store,
        "s",
        manager=SummarizingConversationManager(
            summary_ratio=0.5, preserve_recent_messages=2, summarizer=lambda e: "sum"
        ),
    )
    for n in range(4):
        chat.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
        chat.before_model_call()
        chat.after_model_call()
    chat.reduce()
    other = Conversation(store, "s", manager=SlidingWindowConversationManager(window_size=2))
    chat.append(Message.user("conflicting"))
    other.append(Message.user("retried after a conflict"))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts every call that would start a span or read the clock for one."""
    calls = {"start_span": 0, "start_as_current_span": 0, "perf_counter": 0}
    for cls in (trace.ProxyTracer, trace.NoOpTracer):
        for name in ("start_span", "start_as_current_span"):
            original = getattr(cls, name)

            def wrapped(self: Any, *args: Any, __original: Any = original, __name: str = name, **kwargs: Any) -> Any:
                calls[__name] += 1
                return __original(self, *args, **kwargs)

            monkeypatch.setattr(cls, name, wrapped)
    real_clock = time.perf_counter

    def clock() -> float:
        calls["perf_counter"] += 1
        return real_clock()

    monkeypatch.setattr(time, "perf_counter", clock)  # the spans module reads it as time.perf_counter
    return calls


def test_with_no_provider_configured_nothing_is_started(counted: dict[str, int]) -> None:
    # the premise: nothing in this process set a global provider (Strands runs in a child)
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert telemetry.active() is None
    exercise()
    assert counted == {"start_span": 0, "start_as_current_span": 0, "perf_counter": 0}


def test_configured_off_records_nothing(otel: Recorded, counted: dict[str, int]) -> None:
    telemetry.configure(tracer_provider=otel.tracer_provider, enabled=False)
    exercise()
    assert otel.spans() == []
    assert counted["perf_counter"] == 0


def test_the_same_work_is_recorded_once_a_provider_is_there(otel: Recorded) -> None:
    exercise()  # the control: the counts above are zero because nothing was on, not because nothing ran
    names = {span.name for span in otel.spans()}
    assert names == {
        "contextledger.commit",
        "contextledger.restore",
        "contextledger.reduction",
        "contextledger.summarize",
    }


def test_configure_refuses_what_is_not_a_bool() -> None:
    with pytest.raises(telemetry_error()):
        telemetry.configure(enabled="yes")  # type: ignore[arg-type]


def telemetry_error() -> type[Exception]:
    from contextledger.errors import ConfigurationError

    return ConfigurationError


def test_a_global_provider_is_found_and_rechecked_within_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from contextledger.telemetry import state

    telemetry.configure()  # nothing given: the global providers decide
    assert telemetry.active() is None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # what trace.set_tracer_provider(provider) makes the API answer (the process-wide one stays unset)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    assert telemetry.active() is None  # the answer is kept for RECHECK seconds...
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + state.RECHECK + 0.01)
    found = telemetry.active()  # ...then asked again
    assert found is not None
    assert found.tracer_provider is provider
    Conversation(MemoryStore(), "s").append(Message.user("traced"))
    assert [s.name for s in exporter.get_finished_spans()] == ["contextledger.restore", "contextledger.commit"]
    telemetry.configure()
