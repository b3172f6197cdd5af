"""Telemetry fixtures: the OpenTelemetry SDK's in-memory span exporter and metric reader.

contextledger is pointed at them with ``telemetry.configure`` (the global providers stay
unset, so the rest of the suite runs with telemetry off); hosts that only know the global
provider (Strands) are driven in a child process (``strands_child.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextledger import telemetry

ROOT = Path(__file__).resolve().parents[2]


def run_python(
    args: list[str],
    *,
    cwd: Path,
    path: Iterable[Path] = (),
    env: Mapping[str, str] | None = None,
    without: Iterable[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` in a fresh interpreter with this tree's ``src`` (then ``path``) first; it must succeed.

    ``env`` is added to the environment, the variables named in ``without`` are taken out.
    """
    dropped = set(without)
    environment = {k: v for k, v in os.environ.items() if k not in dropped}
    environment.update(env or {})
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *map(str, path), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def attrs(item: Any) -> dict[str, Any]:
    """The attributes of a span or a data point, as a plain dict."""
    return dict(item.attributes or {})


@dataclass
class Recorded:
    """What the in-memory exporter and reader hold."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        found = [s for s in self.spans() if s.context.span_id == span.parent.span_id]
        return found[0] if found else None

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric`` (empty when it was never recorded)."""
        data = self.reader.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for m in scope.metrics
            if m.name == metric
            for point in m.data.data_points
        ]

    def total(self, metric: str, **attributes: Any) -> float:
        """The sum of a counter's points (or a histogram's sums) whose attributes include ``attributes``."""
        total = 0.0
        for point in self.points(metric):
            if all(point.attributes.get(k) == v for k, v in attributes.items()):
                total += point.sum if hasattr(point, "bucket_counts") else point.value
        return total


@pytest.fixture
def otel() -> Iterator[Recorded]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield Recorded(exporter, reader, tracer_provider)
    telemetry.configure()
    tracer_provider.shutdown()
    meter_provider.shutdown()
