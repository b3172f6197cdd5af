"""The example sends a traced Strands agent to a collector on loopback, and draws the trace."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.telemetry.conftest import ROOT, run_python


@pytest.fixture
def collector() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    """An OTLP/HTTP trace collector on a free loopback port, keeping what it receives."""
    received: list[ExportTraceServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                received.append(ExportTraceServiceRequest.FromString(body))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_the_example_sends_the_reductions_inside_the_agent_turns_to_a_local_collector(
    collector: tuple[str, list[ExportTraceServiceRequest]], tmp_path: Path
) -> None:
    endpoint, received = collector
    picture = tmp_path / "trace.png"
    run_python([str(ROOT / "examples" / "otel_trace.py"), "--otlp", endpoint, "--png", str(picture)], cwd=tmp_path)
    spans = [
        span
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    by_id = {span.span_id: span for span in spans}
    names = {span.name for span in spans}
    assert {"contextledger.commit", "contextledger.reduction", "contextledger.restore"} <= names
    assert "execute_event_loop_cycle" in names
    per_turn = [
        span
        for span in spans
        if span.name == "contextledger.reduction"
        and any(
            a.key == "contextledger.reduction.trigger" and a.value.string_value == "per_turn" for a in span.attributes
        )
    ]
    assert per_turn
    for span in per_turn:
        assert by_id[span.parent_span_id].name == "execute_event_loop_cycle"
    services = {
        a.value.string_value
        for request in received
        for resource in request.resource_spans
        for a in resource.resource.attributes
        if a.key == "service.name"
    }
    assert services == {"contextledger-example"}
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
