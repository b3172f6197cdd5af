"""Per-test PostgreSQL databases, cloned ahead of need and dropped after use by one background thread.

Every PostgreSQL test gets a database of its own, never used before, cloned from a
template migrated once per session. The clone (``CREATE DATABASE ... TEMPLATE``) and the
drop are work for the server, not for the test: :class:`Databases` keeps a few clones of
each busy template ready and drops returned databases later, on a thread of its own, so
a test waits for neither while the server (another core) does them. Nothing about what a
test sees changes: the database it takes was made from the template and handed to no one
else, and is dropped ``WITH (FORCE)`` as before, only later.

On PostgreSQL 15 and later the clone uses ``STRATEGY = FILE_COPY``: the template is a few
megabytes of catalog, which a file copy (and two checkpoints, cheap without fsync) clones
with about a third of the server's CPU time of the default ``WAL_LOG``, which writes every
page into the WAL and through shared buffers (which the drop then has to scan out again).

The thread stops at :meth:`Databases.close` (end of the session), which drops every
database still left; an error on the thread is raised by the next :meth:`Databases.take`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Engine

__all__ = ["Databases"]

logger = logging.getLogger(__name__)

TAKE_TIMEOUT = 120.0
"""Seconds :meth:`Databases.take` waits for a clone before it gives up."""


class Databases:
    """Clones of templates made ahead, and databases dropped behind, on a background thread.

    Args:
        admin: An ``AUTOCOMMIT`` engine on the server's maintenance database.
        prefix: How the names of the databases it makes begin.
    """

    def __init__(self, admin: Engine, prefix: str = "cl_test_") -> None:
        self._admin = admin
        self._prefix = prefix
        with admin.connect() as conn:
            version = int(conn.execute(text("SHOW server_version_num")).scalar_one())
        self._strategy = " STRATEGY = FILE_COPY" if version >= 150000 else ""
        self._ready: dict[str, deque[str]] = {}
        self._ahead: dict[str, int] = {}
        self._drops: deque[str] = deque()
        self._error: BaseException | None = None
        self._stopping = False
        self._paused = 0
        self._busy = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="postgres-databases", daemon=True)
        self._thread.start()

    def create(self, template: str | None = None) -> str:
        """Create a database now (from ``template``, else the server's default) and return its name."""
        name = f"{self._prefix}{uuid.uuid4().hex[:12]}"
        clause = f" TEMPLATE {template}{self._strategy}" if template else ""
        with self._admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}{clause}"))
        return name

    def drop(self, name: str) -> None:
        """Drop a database now, closing whatever connections it still has."""
        with self._admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))

    def take(self, template: str, ahead: int = 2) -> str:
        """A fresh clone of ``template`` nobody has used; from now on ``ahead`` more are kept ready.

        Raises:
            RuntimeError: The background thread failed (its error is the cause) or no clone
                came within :data:`TAKE_TIMEOUT`.
        """
        with self._cond:
            self._ahead[template] = max(ahead, self._ahead.get(template, 0))
            ready = self._ready.setdefault(template, deque())
            made_here = self._paused and not ready
            self._cond.notify_all()
        if made_here:  # the thread is held still: clone here rather than wait for it
            return self.create(template)
        with self._cond:
            if not self._cond.wait_for(lambda: ready or self._error is not None, timeout=TAKE_TIMEOUT):
                raise RuntimeError(f"no clone of {template} within {TAKE_TIMEOUT:.0f} s")
            if self._error is not None:
                raise RuntimeError("cloning test databases failed") from self._error
            name = ready.popleft()
            self._cond.notify_all()
            return name

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the thread still (after its current statement) for a test that needs a quiet server.

        A ``CREATE`` or ``DROP DATABASE`` elsewhere on the server is a transaction of its
        own, and while it runs ``VACUUM`` keeps the dead row versions it might still see;
        a test that inspects what ``VACUUM FULL`` left on disk runs inside this.
        """
        with self._cond:
            self._paused += 1
            self._cond.wait_for(lambda: not self._busy)
        try:
            yield
        finally:
            with self._cond:
                self._paused -= 1
                self._cond.notify_all()

    def give_back(self, name: str) -> None:
        """Have a database dropped later (``WITH (FORCE)``); it must not be used any more."""
        with self._cond:
            self._drops.append(name)
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the thread and drop every database it made or was given back; idempotent."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()
        with self._cond:
            left = [*self._drops, *(name for ready in self._ready.values() for name in ready)]
            self._drops.clear()
            self._ready.clear()
        for name in left:
            self.drop(name)

    def _short(self) -> str | None:
        """A template with fewer clones ready than asked for (called with the lock held)."""
        for template, ready in self._ready.items():
            if len(ready) < self._ahead.get(template, 0):
                return template
        return None

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._stopping or (not self._paused and (self._short() is not None or bool(self._drops)))
                )
                if self._stopping:
                    return
                # A test may be waiting for a clone; drops only free space, so they come second.
                template = self._short()
                dropping = None if template is not None else self._drops.popleft()
                self._busy = True
            try:
                if template is not None:
                    name = self.create(template)
                    with self._cond:
                        self._ready[template].append(name)
                        self._cond.notify_all()
                elif dropping is not None:
                    self.drop(dropping)
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
            except BaseException as exc:  # handed to the next take(); the thread's work ends here
                logger.exception("template=<%s> | making or dropping a test database failed", template)
                with self._cond:
                    self._busy = False
                    self._error = exc
                    if dropping is not None:
                        self._drops.append(dropping)
                    self._cond.notify_all()
                return
