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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
        self._cond = threading.Condition()
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

    @contextmanager
    def call(self) -> Iterator[None]:
        """Run one store call inside the gate.

        Raises:
            LedgerClosed: The store was closed before the call started.
        """
        me = threading.get_ident()
        with self._cond:
            self.check()
            self._inside[me] = self._inside.get(me, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                depth = self._inside[me] - 1
                if depth:
                    self._inside[me] = depth
                else:
                    del self._inside[me]
                self._cond.notify_all()

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
