"""A store's open/closed state: calls after ``close()`` fail, calls already running finish.

Drivers reconnect on their own (SQLAlchemy's pool, redis-py's client), so a store that
only released its connections on close would quietly keep working. Every store call
passes through a :class:`Gate`: once closed, a call raises
:class:`~contextledger.errors.LedgerClosed` before touching the driver; ``close()``
waits (bounded) for the calls already inside to finish -- a commit racing a close
either completes, with its outcome known, or never starts -- and only then releases
the connections.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from contextledger.errors import LedgerClosed

__all__ = ["Gate"]

logger = logging.getLogger(__name__)


class Gate:
    """Counts the calls inside a store and refuses new ones once it is closed.

    Args:
        what: How errors name the store (e.g. its masked URL).
        drain_timeout: Seconds :meth:`close` waits for running calls before releasing anyway.
    """

    def __init__(self, what: str, *, drain_timeout: float = 30.0) -> None:
        self._what = what
        self._drain_timeout = drain_timeout
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # close() waits on it; calls take the bare lock
        self._inside: dict[int, int] = {}  # thread id -> nesting depth
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def check(self) -> None:
        """Raise if closed.

        Raises:
            LedgerClosed: The store was closed.
        """
        if self._closed:
            raise LedgerClosed(f"the ledger at {self._what} is closed; open a new one")

    def call(self) -> _Call:
        """A context manager running one store call inside the gate.

        Raises:
            LedgerClosed: The store was closed before the call started (on entering).
        """
        return _Call(self)

    def close(self, release: Callable[[], None]) -> None:
        """Refuse new calls, wait for running ones (other threads'), then ``release`` once.

        Idempotent: a second close does nothing.
        """
        me = threading.get_ident()
        with self._cond:
            if self._closed:
                return
            self._closed = True
            drained = self._cond.wait_for(lambda: not (set(self._inside) - {me}), timeout=self._drain_timeout)
        if not drained:
            logger.warning(
                "store=<%s>, timeout=<%s> | closing while calls are still running", self._what, self._drain_timeout
            )
        release()


class _Call:
    """One call inside a :class:`Gate` (a class, not a generator: every store call makes one).

    Entering counts the call for its thread (nesting allowed); leaving uncounts it and,
    once the gate is closed, wakes the ``close()`` waiting for calls to drain.
    """

    __slots__ = ("_gate", "_me")

    def __init__(self, gate: Gate) -> None:
        self._gate = gate
        self._me = 0

    def __enter__(self) -> None:
        gate = self._gate
        me = self._me = threading.get_ident()
        with gate._lock:
            gate.check()
            inside = gate._inside
            inside[me] = inside.get(me, 0) + 1

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        gate, me = self._gate, self._me
        with gate._lock:
            inside = gate._inside
            depth = inside[me] - 1
            if depth:
                inside[me] = depth
            else:
                del inside[me]
            if gate._closed:  # only close() waits on the condition
                gate._cond.notify_all()
