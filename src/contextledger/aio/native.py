"""An append sent with the store's native async driver from the event loop's thread.

On a Redis store (one server, plain TCP) an append to a conversation that has committed
before is one ``EVALSHA``; on a PostgreSQL store (psycopg) it is one statement. :func:`append_native`
builds its changeset on the loop's thread with the sync code (:meth:`Transaction.prepare
<contextledger.conversation.transaction.Transaction.prepare>`), sends that one script or
statement with the native async driver (``redis.asyncio``:
:class:`contextledger.stores.redis.asend.NativeSend`; psycopg's ``AsyncConnection``:
:class:`contextledger.stores.sql.write.pg_asend.NativeSend`) and takes the commit with the
sync code (:meth:`~contextledger.conversation.transaction.Transaction.finish`): no worker
thread. Everything else goes to a worker, as every other call: a write that is not that
one script or statement (settling a lost reply, a host's riding write, a repair, a
conversation's first commit, a changeset that evicts) before anything is sent; a refusal
(a conflict, a deleted conversation) after it, nothing applied, to run again there and
meet the error as the sync API does; a lost reply or a cancellation during the send, to
be settled there by its changeset id (applied exactly once) before the call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from contextledger.aio.loop_end import watch
from contextledger.aio.runner import Lane, Runner, outlast
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, Edit
from contextledger.core.seam import Lost, Refused, WouldWait
from contextledger.errors import ConfigurationError
from contextledger.model.messages import Message
from contextledger.stores.base import LedgerStore
from contextledger.telemetry import spans as telemetry

R = TypeVar("R")

__all__ = ["NativeSend", "append_native", "native_for", "native_send", "on_worker"]


class NativeSend(Protocol):
    """A store's native async sender of one commit (a Redis script, a PostgreSQL statement)."""

    @property
    def store(self) -> LedgerStore:
        """The store whose commits it sends."""

    @property
    def sent(self) -> int:
        """How many commits it sent (tests count them)."""

    def call(self, changeset: Changeset) -> Any | None:
        """What :meth:`send` sends for ``changeset``, or ``None`` when the sync path sends it.

        Raises:
            ContextLedgerError: ``changeset`` cannot be stored (nothing sent).
        """

    async def send(self, call: Any) -> int:
        """Send ``call`` once; the version it made.

        Raises:
            Refused: Nothing was applied.
            Lost: The connection failed after sending; applied at most once.
        """

    async def aclose(self) -> None:
        """Close the calling loop's connections."""


def native_send(store: LedgerStore, native: bool | None, inline: bool | None) -> NativeSend | None:
    """``store``'s native sender as ``native`` asks (see :meth:`AsyncLedger.connect`).

    ``None``: where the store has one, unless ``inline`` is ``False`` (every call a job
    on a worker).

    Raises:
        ConfigurationError: ``native`` is not a bool or ``None``, or is true for a store
            without a native send.
    """
    if native is not None and not isinstance(native, bool):
        raise ConfigurationError(f"native must be a bool or None, got {native!r}")
    if native is False or (native is None and inline is False):
        return None
    send = native_for(store)
    if send is None and native:
        raise ConfigurationError(
            f"native=True sends appends with redis.asyncio or psycopg's AsyncConnection, which a Redis store on one"
            f" server over plain TCP and a PostgreSQL store on psycopg take; {store.url} does not"
        )
    return send


def native_for(store: LedgerStore) -> NativeSend | None:
    """The native async sender for ``store``'s appends, or ``None`` where every append hops to a worker."""
    url = str(store.url)
    # The drivers are imported only for their own store.
    if url.startswith("redis://"):
        from contextledger.stores.redis import asend

        return asend.NativeSend.of(store)
    if url.startswith("postgresql"):
        from contextledger.stores.sql.write import pg_asend

        return pg_asend.NativeSend.of(store)
    return None


async def append_native(
    sync: Conversation, runner: Runner, lane: Lane, send: NativeSend, messages: tuple[Message | Mapping[str, Any], ...]
) -> list[Message]:
    """``sync.append(*messages)`` with its one script sent from the loop; the caller took ``lane``.

    Raises:
        asyncio.CancelledError: The caller was cancelled; the append was settled first
            (applied exactly once, or not at all if it had not been sent).
    """
    transaction = sync.transaction
    lock = transaction.lock
    if not lock.acquire(blocking=False):  # a sync call of another thread is committing: wait on a worker
        return await on_worker(runner, lane, sync.append, messages, cancelled=False)
    try:
        converted, stored = transaction.converted(messages)
        if stored is not None or not converted:
            lock.release()
            runner.leave(lane)
            return stored if stored is not None else []
        prepared = transaction.prepare(lambda _view: Edit.appending(converted))
        call = send.call(prepared.changeset) if prepared is not None else None
    except WouldWait:
        lock.release()
        return await on_worker(runner, lane, sync.append, messages, cancelled=False)
    except BaseException:
        lock.release()
        runner.leave(lane)
        raise
    if prepared is None or call is None:
        lock.release()
        return await on_worker(runner, lane, sync.append, messages, cancelled=False)
    cancelled = False
    watch(send)  # the loop closes its connections as it ends (aio.loop_end)
    try:
        with telemetry.sending(send.store, prepared.changeset) as sent:  # the span the sync commit records
            sent.version = version = await send.send(call)
    except Refused:  # nothing applied: the sync path meets the same reply and answers it
        lock.release()
        return await on_worker(runner, lane, sync.append, messages, cancelled=False)
    except (Lost, asyncio.CancelledError) as exc:
        # Sent at most once: settled by its changeset id on the worker before this call ends.
        cancelled = isinstance(exc, asyncio.CancelledError)
        transaction.lost(prepared.changeset)
        lock.release()
        return await on_worker(runner, lane, sync.append, messages, cancelled=cancelled)
    except BaseException:
        lock.release()
        runner.leave(lane)
        raise
    try:
        transaction.finish(prepared, version)
    finally:
        lock.release()
        runner.leave(lane)
    return converted


async def on_worker(
    runner: Runner,
    lane: Lane,
    call: Callable[..., R],
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    cancelled: bool,
) -> R:
    """Run ``call(*args, **kwargs)`` as a job on a worker in ``lane``, which the caller took.

    A cancellation of the caller is re-raised once the job ended (the call is settled first).
    """
    job = runner.resume(lane, call, args, kwargs or {})
    if cancelled:
        with contextlib.suppress(Exception):  # the caller was cancelled: it hears that, once the append is settled
            await outlast(job)
        job.error = None  # not taken: no cycle through its traceback (which holds the job, and its loop)
        raise asyncio.CancelledError
    try:
        await job.future
    except asyncio.CancelledError:
        await runner.cancelled(job)
    result: R = job.outcome()
    return result
