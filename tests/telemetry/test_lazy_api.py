"""The OpenTelemetry API is imported only when a provider may be configured; a provider set later is still found.

Each case runs in a fresh interpreter: this test process has the API imported already.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from contextledger.telemetry.state import PROVIDER_ENV
from tests.telemetry.conftest import run_python

WORK = """
import json, sys, time
from contextledger import Ledger, Message, telemetry

ledger = Ledger.connect(sys.argv[1])
chat = ledger.conversation("s")

def turn(n):
    chat.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
    chat.before_model_call()
    return len(ledger.conversation("s").messages)

turn(0)
report = {"imported_before": "opentelemetry.trace" in sys.modules, "active_before": telemetry.active() is not None}
"""


def run(tmp_path: Path, body: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    script = WORK + textwrap.dedent(body) + "\nprint(json.dumps(report))\n"
    done = run_python(["-c", script, f"sqlite:///{tmp_path / 'lazy.db'}"], cwd=tmp_path, env=env, without=PROVIDER_ENV)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_process_that_never_imports_the_api_does_not_import_it(tmp_path: Path) -> None:
    report = run(tmp_path, "report['imported_after'] = any(m.startswith('opentelemetry') for m in sys.modules)")
    assert report == {"imported_before": False, "active_before": False, "imported_after": False}


def test_a_provider_the_application_sets_later_is_found(tmp_path: Path) -> None:
    body = """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    from contextledger.telemetry.state import RECHECK
    time.sleep(RECHECK * 1.5)  # the off answer is kept that long
    turn(1)
    report["spans"] = sorted({span.name for span in exporter.get_finished_spans()})
    """
    report = run(tmp_path, body)
    assert report["imported_before"] is False
    assert report["active_before"] is False
    assert report["spans"] == ["contextledger.commit", "contextledger.restore"]


def test_a_provider_named_in_the_environment_is_made_without_the_application_importing_the_api(
    tmp_path: Path,
) -> None:
    report = run(tmp_path, "", env={"OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"})
    assert report == {"imported_before": True, "active_before": True}
