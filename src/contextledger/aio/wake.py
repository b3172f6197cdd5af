"""How a worker thread wakes the event loop whose task waits for its call: one pipe per loop.

A worker that finished a call posts it to the :class:`Mailbox` of its caller's loop. The
mailbox wakes the loop with one byte on a pipe the loop watches (``loop.add_reader``), and
a call finished while the loop has not yet taken the ones posted before it rides along
with them: one wake-up for the batch.

Why not ``loop.call_soon_threadsafe`` per call: it builds a handle, writes to the loop's
socket pair and reads it back twice, and -- the larger part -- the loop, woken while the
worker still holds the GIL, waits for it and is woken a second time; with a pipe of our
own the worker's write is its last step before it blocks for its next job. Measured with
``benchmarks/aio.py``: about a third to a half less CPU per hand-over. A loop that cannot watch a pipe
(on Windows) is woken with ``call_soon_threadsafe``.

Lifetime: the pipe lives as long as its loop. It is closed when the loop is collected, or
earlier, when a mailbox is made for another loop after this one was closed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import threading
import weakref
from typing import Protocol

__all__ = ["Mailbox", "Woken", "mailbox"]


class Woken(Protocol):
    """A finished call, as its mailbox sees it."""

    def woken(self) -> None:
        """On the caller's loop: the call ended."""


class Mailbox:
    """The calls finished for the tasks of one event loop, and how that loop is woken for them."""

    __slots__ = ("__weakref__", "_armed", "_done", "_fds", "_lock", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch a new pipe on ``loop`` (call this on the loop's own thread)."""
        # Weak: the mailboxes are kept per loop in a WeakKeyDictionary, whose values must not hold their key.
        self._loop = weakref.ref(loop)
        self._done: collections.deque[Woken] = collections.deque()
        self._armed = False
        self._lock = threading.Lock()  # a write never meets a closed (or reused) descriptor
        self._fds: tuple[int, int] | None = None
        if sys.platform == "win32":  # select() there watches sockets only, never a pipe
            return
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        try:
            loop.add_reader(read, self._readable)
        except NotImplementedError:  # the loop watches no descriptors: woken by call_soon_threadsafe
            os.close(read)
            os.close(write)
            return
        self._fds = (read, write)
        weakref.finalize(loop, self.close)

    def post(self, job: Woken) -> None:
        """Hand the finished ``job`` to its loop (any thread)."""
        if self.put(job):
            self.ring()

    def put(self, job: Woken) -> bool:
        """The first half of :meth:`post`: queue ``job``; whether its loop must be woken (then :meth:`ring`).

        A worker drops its own reference to ``job`` between the two, so that a loop that
        ends as soon as it is woken is not kept alive by a thread waiting for the GIL.
        """
        self._done.append(job)
        # Lock-free under the GIL: the loop clears the flag before it takes the calls, so a
        # worker that finds the flag set added its call before a delivery that takes it.
        if self._armed:
            return False
        self._armed = True
        return True

    def ring(self) -> None:
        """Wake the loop for the calls queued (once :meth:`put` said so; any thread)."""
        if self._fds is not None:
            with self._lock, contextlib.suppress(OSError):  # full: a wake-up is pending; closed: nobody waits
                if self._fds is not None:
                    os.write(self._fds[1], b"\0")
            return
        loop = self._loop()
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._deliver)

    def _readable(self) -> None:
        fds = self._fds
        if fds is not None:
            # Read before the flag is cleared: a byte written after it stays for the next wake-up.
            with contextlib.suppress(BlockingIOError):
                os.read(fds[0], 4096)
        self._deliver()

    def _deliver(self) -> None:
        self._armed = False
        done = self._done
        while done:
            done.popleft().woken()

    def close(self) -> None:
        """Close the pipe (its loop was closed or collected)."""
        with self._lock:
            fds, self._fds = self._fds, None
        if fds is not None:
            loop = self._loop()
            if loop is not None and not loop.is_closed():
                loop.remove_reader(fds[0])
            os.close(fds[0])
            os.close(fds[1])


_mailboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Mailbox] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _forget_pipes() -> None:
    """In a forked child: its loops' pipes are shared with the parent, whose loops would take its wake-ups."""
    global _lock
    _lock = threading.Lock()
    _mailboxes.clear()


os.register_at_fork(after_in_child=_forget_pipes)


def mailbox(loop: asyncio.AbstractEventLoop) -> Mailbox:
    """The mailbox of ``loop``, the running loop of the calling thread (made at its first call)."""
    found = _mailboxes.get(loop)
    if found is not None:
        return found
    with _lock:
        for other in [other for other in _mailboxes if other.is_closed()]:
            _mailboxes.pop(other).close()  # its tasks are gone: its pipe need not wait for the collector
        found = _mailboxes[loop] = Mailbox(loop)
    return found
