"""Whether telemetry is on, and the tracer and instruments when it is.

Off is the default and costs one check per operation: :func:`active` returns ``None``
while the OpenTelemetry API's global tracer and meter providers are both the API's own
placeholders (its proxy or no-op providers: nothing was configured), while nothing in the
process imported the API (nor named a provider in the environment: the API is imported
here only then), or when ``opentelemetry-api`` is not installed at all. Asking the API for its providers reads
the environment each time, so the answer is kept for :data:`RECHECK` seconds: a provider
an application sets globally is picked up by the operations that start after that, and
one given to :func:`configure` at once. :func:`configure` also overrides the global
providers for contextledger alone, turns telemetry off, or opts in to content capture.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from contextledger import __version__
from contextledger.errors import ConfigurationError
from contextledger.telemetry import names

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Counter, Histogram, MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

# The OpenTelemetry API, imported once something may have configured it (see _api): a
# process that never imports it pays nothing for it (its import takes about 10 ms).
_trace: Any = None
_metrics: Any = None

PROVIDER_ENV = ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
"""Environment variables through which the API makes a provider itself, unasked by the application."""

__all__ = ["CAPTURE_CONTENT_ENV", "RECHECK", "ParentSource", "Telemetry", "active", "add_parent_source", "configure"]

SCOPE = "contextledger"
"""The instrumentation scope name of every span and metric."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' opt-in for message content in spans (``true`` to opt in)."""

RECHECK = 0.25
"""Seconds the global providers found are trusted before the API is asked again."""

ParentSource = Callable[[], "Context | None"]
"""Returns the context a new span should start in, or ``None`` for the current one."""


@dataclass(frozen=True)
class Telemetry:
    """The tracer and instruments of one pair of providers, and the content opt-in.

    Attributes:
        tracer_provider: Where the spans go (a host bridge starts its own spans there).
        tracer: Starts contextledger's spans.
        capture_content: Message content may go into spans (the user opted in).
        commit_duration: Seconds per store commit, by backend and outcome.
        restore_duration: Seconds per restore (one read of the active view), by backend.
        conflicts: Version conflicts met by commits, by backend.
        retries: Commits sent again after a conflict, by backend.
        outcome_unknown: Commits whose reply was lost and could not be read back, by backend.
        reductions: Committed reductions, by trigger and strategy.
        tokens_evicted: Estimated tokens of the entries reductions evicted, by trigger and strategy.
        window_tokens: Estimated tokens in the window after each model call, by backend.
    """

    tracer_provider: TracerProvider
    tracer: Tracer
    capture_content: bool
    commit_duration: Histogram
    restore_duration: Histogram
    conflicts: Counter
    retries: Counter
    outcome_unknown: Counter
    reductions: Counter
    tokens_evicted: Counter
    window_tokens: Histogram

    def parent(self) -> Context | None:
        """The context a new span starts in: a host's mapped span (see :func:`add_parent_source`), else the current."""
        for source in _parent_sources:
            context = source()
            if context is not None:
                return context
        return None


@dataclass(frozen=True)
class _Config:
    enabled: bool = True
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    capture_content: bool | None = None


_config = _Config()
_cache: tuple[float, object, object, Telemetry | None] = (-math.inf, None, None, None)
_lock = threading.Lock()
_parent_sources: list[ParentSource] = []


def configure(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool | None = None,
    enabled: bool = True,
) -> None:
    """Choose where contextledger's spans and metrics go (each call replaces the last).

    Without a call, the global providers of the OpenTelemetry API are used -- whatever
    the application (or a host such as Strands) set with ``trace.set_tracer_provider`` and
    ``metrics.set_meter_provider`` -- and nothing is recorded while none is set.

    Args:
        tracer_provider: Spans go here instead of the global tracer provider.
        meter_provider: Metrics go here instead of the global meter provider.
        capture_content: ``True`` puts message content (the entries a summarizer read and
            the summary it wrote) into ``contextledger.summarize`` spans. ``None`` follows
            the environment variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            (``true`` opts in); without either, no content ever goes into a span.
        enabled: ``False`` turns contextledger's telemetry off whatever is configured.

    Raises:
        ConfigurationError: ``enabled`` or ``capture_content`` is not a bool, or the
            OpenTelemetry API is not installed while a provider is given.
    """
    global _config, _cache
    if not isinstance(enabled, bool) or not (capture_content is None or isinstance(capture_content, bool)):
        raise ConfigurationError("telemetry.configure: enabled and capture_content are bools")
    if (tracer_provider is not None or meter_provider is not None) and not _api(given=True):
        raise ConfigurationError("telemetry needs the OpenTelemetry API: pip install 'contextledger[otel]'")
    with _lock:
        _config = _Config(enabled, tracer_provider, meter_provider, capture_content)
        _cache = (-math.inf, None, None, None)


def add_parent_source(source: ParentSource) -> None:
    """Let ``source`` choose the parent of contextledger's spans (a host whose traces are not OpenTelemetry's).

    Sources are asked in the order added; the first context returned wins, and
    ``None`` from all of them leaves the current OpenTelemetry context in charge.
    """
    if source not in _parent_sources:
        _parent_sources.append(source)


def remove_parent_source(source: ParentSource) -> None:
    """Stop asking ``source`` (nothing happens when it was not added)."""
    if source in _parent_sources:
        _parent_sources.remove(source)


def active() -> Telemetry | None:
    """The telemetry to record with now, or ``None`` when nothing would be recorded.

    The off path is what every append pays: one monotonic clock read and a comparison
    (the providers are looked up again every :data:`RECHECK` seconds), no span, no context
    object.
    """
    cached = _cache
    if time.monotonic() < cached[0]:
        return cached[3]
    config = _config
    if not config.enabled:
        return None
    if _trace is None and not _api():  # a provider given to configure() imported it already
        # Nothing imported the API, so nothing set a provider: off, asked again after RECHECK.
        _remember(config, time.monotonic() + RECHECK, None, None, None)
        return None
    tracer_provider = config.tracer_provider or _trace.get_tracer_provider()
    meter_provider = config.meter_provider or _metrics.get_meter_provider()
    both_given = config.tracer_provider is not None and config.meter_provider is not None
    until = math.inf if both_given else time.monotonic() + RECHECK
    if cached[1] is tracer_provider and cached[2] is meter_provider:
        built = cached[3]
    else:
        built = _build(config, tracer_provider, meter_provider)
    _remember(config, until, tracer_provider, meter_provider, built)
    return built


def _api(*, given: bool = False) -> bool:
    """Import the OpenTelemetry API if a provider may be configured; whether it is imported.

    A provider is set through the API (so the application imported it), given to
    :func:`configure` (``given``), or named in the environment (:data:`PROVIDER_ENV`), from
    which the API makes it when first asked. Otherwise none can be set yet, and the API is
    not imported: it would answer with its placeholders.
    """
    global _trace, _metrics
    if _trace is not None:
        return True
    wanted = (
        given
        or "opentelemetry.trace" in sys.modules
        or "opentelemetry.metrics" in sys.modules
        or any(os.environ.get(name) for name in PROVIDER_ENV)
    )
    if not wanted:
        return False
    try:
        from opentelemetry import metrics, trace
    except ImportError:  # the otel extra is not installed: telemetry stays off
        return False
    _metrics, _trace = metrics, trace
    return True


def _is_placeholder(provider: object) -> bool:
    # The API package's own providers (proxy, no-op) record nothing; a configured one
    # comes from an SDK. Their classes are told apart by where they live, not by reaching in.
    return type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


def _remember(
    config: _Config, until: float, tracer_provider: object, meter_provider: object, built: Telemetry | None
) -> None:
    global _cache
    with _lock:
        if _config is config:  # a configure() meanwhile keeps its own (empty) cache
            _cache = (until, tracer_provider, meter_provider, built)


def _build(config: _Config, tracer_provider: Any, meter_provider: Any) -> Telemetry | None:
    built: Telemetry | None = None
    if not (_is_placeholder(tracer_provider) and _is_placeholder(meter_provider)):
        capture = config.capture_content
        if capture is None:
            capture = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
        meter = meter_provider.get_meter(SCOPE, __version__)
        seconds = list(names.BUCKETS_SECONDS)
        built = Telemetry(
            tracer_provider=tracer_provider,
            tracer=tracer_provider.get_tracer(SCOPE, __version__),
            capture_content=capture,
            commit_duration=meter.create_histogram(
                names.METRIC_COMMIT_DURATION,
                unit="s",
                description="Duration of one store commit (a changeset sent once)",
                explicit_bucket_boundaries_advisory=seconds,
            ),
            restore_duration=meter.create_histogram(
                names.METRIC_RESTORE_DURATION,
                unit="s",
                description="Duration of one restore (state and active view read)",
                explicit_bucket_boundaries_advisory=seconds,
            ),
            conflicts=meter.create_counter(
                names.METRIC_CONFLICTS, unit="{conflict}", description="Version conflicts met by commits"
            ),
            retries=meter.create_counter(
                names.METRIC_RETRIES, unit="{commit}", description="Commits re-planned and sent again after a conflict"
            ),
            outcome_unknown=meter.create_counter(
                names.METRIC_OUTCOME_UNKNOWN,
                unit="{commit}",
                description="Commits whose reply was lost and whose outcome could not be read back",
            ),
            reductions=meter.create_counter(
                names.METRIC_REDUCTIONS, unit="{reduction}", description="Committed reductions"
            ),
            tokens_evicted=meter.create_counter(
                names.METRIC_TOKENS_EVICTED, unit="{token}", description="Estimated tokens of the entries evicted"
            ),
            window_tokens=meter.create_histogram(
                names.METRIC_WINDOW_TOKENS,
                unit="{token}",
                description="Estimated tokens in the context window after a model call",
                explicit_bucket_boundaries_advisory=list(names.BUCKETS_TOKENS),
            ),
        )
    return built
