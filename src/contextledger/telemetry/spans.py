"""Where contextledger's spans and metrics start: one call at each place that does the work.

Each function takes the work as its arguments (the store and what to send, or a
callable) and, when :func:`~contextledger.telemetry.state.active` says telemetry is off,
just does it: no span, no clock, no attribute is built. When it is on, the work runs
inside a span that is current while it runs -- so a summarizer that is itself an
instrumented model call, or a commit inside a reduction, nests under it -- and the
metrics are recorded beside it.

The spans start in the current OpenTelemetry context (a Strands cycle span, an
application's request span), unless a host's bridge names another parent (the OpenAI
Agents SDK's current span, see :func:`~contextledger.telemetry.state.add_parent_source`).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from contextledger.core.seam import Lost, Refused, WouldWait
from contextledger.errors import CommitOutcomeUnknown, ConcurrencyConflict
from contextledger.telemetry import names
from contextledger.telemetry.state import Telemetry, active

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from contextledger.core.changeset import Changeset, ReductionRequest
    from contextledger.core.view import View
    from contextledger.model.records import Reduction, Snapshot, ViewEntry
    from contextledger.stores.base import LedgerStore

__all__ = ["backend_of", "commit", "reduced", "reduction", "restore", "sending", "summarize", "window"]

R = TypeVar("R")


class _Conversation(Protocol):
    """What the spans read of a conversation (public attributes only)."""

    store: LedgerStore
    session_id: str
    agent_id: str

    @property
    def view(self) -> View: ...

    @property
    def model_call_count(self) -> int: ...


@lru_cache(maxsize=64)
def backend_of(url: str) -> tuple[str, str | None]:
    """``(backend, db.system.name)`` of a ledger URL: ``("sqlite", "sqlite")``, ``("memory", None)``, ..."""
    scheme = url.partition("://")[0].lower().split("+", 1)[0]
    backend = {"postgres": "postgresql", "rediss": "redis"}.get(scheme, scheme)
    return backend, (backend if backend in ("sqlite", "postgresql", "redis") else None)


def _base(tel: Telemetry, store: LedgerStore, session_id: str, agent_id: str) -> tuple[dict[str, Any], str]:
    backend, system = backend_of(store.url)
    attributes: dict[str, Any] = {
        names.CONVERSATION_ID: session_id,
        names.AGENT_NAME: agent_id,
        names.BACKEND: backend,
    }
    if system is not None:
        attributes[names.DB_SYSTEM] = system
    return attributes, backend


def _error(span: Span, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


# -- commit ---------------------------------------------------------------------------------


def commit(store: LedgerStore, changeset: Changeset, attempt: int = 0, *, settling: bool = False) -> int:
    """``store.commit(changeset)``, as a ``contextledger.commit`` span and its metrics when telemetry is on.

    ``attempt`` counts the re-plans after conflicts before this send (0: the first);
    ``settling`` marks the send that settles an earlier commit whose outcome stayed unknown.
    """
    tel = active()
    if tel is None:
        return store.commit(changeset)
    with _commit_span(tel, store, changeset, attempt, settling) as sent:
        sent.version = store.commit(changeset)
    return sent.version


@contextmanager
def sending(store: LedgerStore, changeset: Changeset) -> Iterator[_Sent]:
    """A ``contextledger.commit`` span around a send made elsewhere (the async API's native send).

    The block sets ``version`` on what it is given once the store took the commit; a
    :class:`~contextledger.core.seam.Refused` reply is recorded as ``would_wait`` (nothing
    applied, a worker sends it again), a :class:`~contextledger.core.seam.Lost` one as
    ``outcome_unknown`` (the worker's settling commit records how it was resolved).
    When telemetry is off it yields and records nothing.
    """
    tel = active()
    if tel is None:
        yield _Sent()
        return
    with _commit_span(tel, store, changeset, 0, False) as sent:
        yield sent


class _Sent:
    """The version a send inside a commit span got back (``0`` until it returns)."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        self.version = 0


@contextmanager
def _commit_span(
    tel: Telemetry, store: LedgerStore, changeset: Changeset, attempt: int, settling: bool
) -> Iterator[_Sent]:
    attributes, backend = _base(tel, store, changeset.session_id, changeset.agent_id)
    attributes.update(
        {
            names.COMMIT_CHANGESET_ID: changeset.changeset_id,
            names.COMMIT_EXPECTED_VERSION: changeset.expected_version,
            names.COMMIT_APPENDED: len(changeset.appends),
            names.COMMIT_EVICTED: len(changeset.evict),
            names.COMMIT_RETRIES: attempt,
        }
    )
    if changeset.model_call_count is not None:
        attributes[names.MODEL_CALL] = changeset.model_call_count
    if changeset.reduction is not None:
        attributes[names.REDUCTION_ID] = changeset.reduction.reduction_id
        attributes[names.REDUCTION_STRATEGY] = changeset.reduction.strategy
    by_backend = {names.BACKEND: backend}
    if attempt:
        tel.retries.add(1, by_backend)
    outcome = "error"
    started = time.perf_counter()
    sent = _Sent()
    with tel.tracer.start_as_current_span(
        names.SPAN_COMMIT,
        context=tel.parent(),
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield sent
        except ConcurrencyConflict as exc:
            outcome = "conflict"
            tel.conflicts.add(1, by_backend)
            span.set_attribute(names.COMMIT_CONFLICT, True)
            if settling:  # it never applied, and others wrote since
                span.set_attribute(names.COMMIT_SETTLED, "not_applied")
            span.add_event("conflict", {"exception.message": str(exc)})
            raise
        except (WouldWait, Refused):
            outcome = "would_wait"  # an async append tried on the loop: nothing was committed, a worker sends it
            raise
        except (CommitOutcomeUnknown, Lost) as exc:
            outcome = "outcome_unknown"
            tel.outcome_unknown.add(1, by_backend)
            span.set_attribute(names.COMMIT_OUTCOME_UNKNOWN, True)
            _error(span, exc)
            raise
        except BaseException as exc:
            _error(span, exc)
            raise
        else:
            outcome = "committed"
            span.set_attribute(names.VERSION, sent.version)
            span.set_attribute(names.COMMIT_CONFLICT, False)
            if settling:
                span.set_attribute(names.COMMIT_SETTLED, "applied")
        finally:
            span.set_attribute(names.COMMIT_OUTCOME, outcome)
            tel.commit_duration.record(
                time.perf_counter() - started, {names.BACKEND: backend, names.COMMIT_OUTCOME: outcome}
            )


# -- restore --------------------------------------------------------------------------------


def restore(store: LedgerStore, session_id: str, agent_id: str) -> Snapshot | None:
    """``store.load(session_id, agent_id)``, as a ``contextledger.restore`` span and its latency when on."""
    tel = active()
    if tel is None:
        return store.load(session_id, agent_id)
    attributes, backend = _base(tel, store, session_id, agent_id)
    started = time.perf_counter()
    with tel.tracer.start_as_current_span(names.SPAN_RESTORE, context=tel.parent(), attributes=attributes) as span:
        try:
            snapshot = store.load(session_id, agent_id)
        finally:
            tel.restore_duration.record(time.perf_counter() - started, {names.BACKEND: backend})
        span.set_attribute(names.RESTORE_FOUND, snapshot is not None)
        entries = snapshot.entries if snapshot is not None else ()
        span.set_attribute(names.RESTORE_ENTRIES, len(entries))
        if span.is_recording():  # the size costs an encoding of the window: only for a span that keeps it
            span.set_attribute(names.RESTORE_BYTES, _bytes_of(entries))
        if snapshot is not None:
            span.set_attribute(names.VERSION, snapshot.state.version)
        return snapshot


def _bytes_of(entries: tuple[ViewEntry, ...]) -> int:
    from contextledger.model.jsonvalues import dumps_encoded

    return sum(len(dumps_encoded(entry.message.content, compact=True).encode()) for entry in entries)


# -- reductions -----------------------------------------------------------------------------


def reduction(
    conversation: _Conversation,
    request: ReductionRequest | str,
    run: Callable[[], Reduction | None],
    *,
    manager: str | None = None,
    note: Callable[[], str | None] = lambda: None,
) -> Reduction | None:
    """``run()``, a reduction planned and committed, as a ``contextledger.reduction`` span when on.

    ``request`` is the manager's request, or the trigger of a plan a caller or host
    applies; ``note`` says why nothing was reduced when ``run`` returns ``None``.
    """
    tel = active()
    if tel is None:
        return run()
    trigger = request if isinstance(request, str) else request.trigger
    attributes, _ = _base(tel, conversation.store, conversation.session_id, conversation.agent_id)
    attributes[names.REDUCTION_TRIGGER] = trigger
    attributes[names.MODEL_CALL] = conversation.model_call_count
    if manager is not None:
        attributes[names.REDUCTION_MANAGER] = manager
    with tel.tracer.start_as_current_span(
        names.SPAN_REDUCTION,
        context=tel.parent(),
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            done = run()
        except WouldWait:
            span.set_attribute(names.REDUCTION_OUTCOME, "would_wait")  # tried on a loop: a worker runs it again
            raise
        except BaseException as exc:
            span.set_attribute(names.REDUCTION_OUTCOME, "failed")
            span.set_attribute(names.REDUCTION_REASON, f"{type(exc).__name__}: {exc}")
            _error(span, exc)
            raise
        if done is None:
            span.set_attribute(names.REDUCTION_OUTCOME, "nothing")
            reason = note()
            if reason:
                span.set_attribute(names.REDUCTION_REASON, reason)
            return None
        span.set_attributes(
            {
                names.REDUCTION_OUTCOME: "committed",
                names.REDUCTION_ID: done.reduction_id,
                names.REDUCTION_STRATEGY: done.strategy,
                names.REDUCTION_MESSAGES_BEFORE: done.messages_before,
                names.REDUCTION_MESSAGES_AFTER: done.messages_after,
                names.REDUCTION_TOKENS_BEFORE: done.tokens_before,
                names.REDUCTION_TOKENS_AFTER: done.tokens_after,
                names.REDUCTION_EVICTED: len(done.evicted),
                names.VERSION: done.version,
            }
        )
        if done.summary_id is not None:
            span.set_attribute(names.REDUCTION_SUMMARY_ID, done.summary_id)
        reason = done.error or done.detail
        if reason:
            span.set_attribute(names.REDUCTION_REASON, reason)
        return done


def reduced(done: Reduction, before: View) -> None:
    """Count a committed reduction and the estimated tokens of what it evicted from ``before``."""
    tel = active()
    if tel is None:
        return
    by = {names.REDUCTION_TRIGGER: done.trigger, names.REDUCTION_STRATEGY: done.strategy}
    tel.reductions.add(1, by)
    evicted = (before.index_of(entry_id) for entry_id in done.evicted)
    tokens = sum(before[i].tokens for i in evicted if i is not None)
    if tokens:
        tel.tokens_evicted.add(tokens, by)


def summarize(
    conversation: _Conversation, entries: tuple[ViewEntry, ...], summarizer: object, write: Callable[[], str]
) -> str:
    """``write()``, the summarizer called once, as a ``contextledger.summarize`` span when on.

    With content capture on (:func:`~contextledger.telemetry.configure`), the entries it
    read go into ``gen_ai.input.messages`` and the summary into ``gen_ai.output.messages``.
    """
    tel = active()
    if tel is None:
        return write()
    attributes, _ = _base(tel, conversation.store, conversation.session_id, conversation.agent_id)
    attributes[names.SUMMARIZE_ENTRIES] = len(entries)
    attributes[names.SUMMARIZE_TOKENS] = sum(entry.tokens for entry in entries)
    attributes[names.SUMMARIZER] = _name_of(summarizer)
    with tel.tracer.start_as_current_span(names.SPAN_SUMMARIZE, context=tel.parent(), attributes=attributes) as span:
        if tel.capture_content and span.is_recording():
            span.set_attribute(names.INPUT_MESSAGES, _messages_json(entries))
        text = write()
        span.set_attribute(names.SUMMARIZE_OUTPUT_CHARS, len(text))
        if tel.capture_content and span.is_recording():
            output = [{"role": "user", "parts": [{"type": "text", "content": text}]}]
            span.set_attribute(names.OUTPUT_MESSAGES, json.dumps(output, ensure_ascii=False))
        return text


def _name_of(summarizer: object) -> str:
    while isinstance(summarizer, functools.partial):  # a manager binds what it knows to its writer
        summarizer = summarizer.func
    name = getattr(summarizer, "__qualname__", None) or type(summarizer).__qualname__
    return str(name)


def _messages_json(entries: tuple[ViewEntry, ...]) -> str:
    # The GenAI conventions' message shape: role and parts; a non-text block is named by its type.
    messages = []
    for entry in entries:
        parts: list[dict[str, Any]] = []
        for block in entry.message.content:
            if "text" in block:
                parts.append({"type": "text", "content": block["text"]})
            else:
                parts.append({"type": next(iter(block), "unknown")})
        messages.append({"role": entry.message.role, "parts": parts})
    return json.dumps(messages, ensure_ascii=False, default=str)


# -- the window -----------------------------------------------------------------------------


def window(conversation: _Conversation, view: View) -> None:
    """Record the estimated tokens in ``view``, the window a model call of ``conversation`` ended with."""
    tel = active()
    if tel is None:
        return
    backend, _ = backend_of(conversation.store.url)
    tel.window_tokens.record(view.tokens, {names.BACKEND: backend})
