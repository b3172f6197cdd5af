"""How an async shell calls the sync core: one call, one hand-over to a worker thread.

A shell holds the sync object and the :class:`~contextledger.aio.runner.Runner` that runs
its calls. :class:`coroutine_of` turns a sync method into the coroutine method of a shell,
with the sync method's signature and docstring, and :class:`synced` reads an attribute of
the sync object, so a shell states each method and property once, by name.
"""

from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast, overload

from contextledger.aio.runner import Lane, Runner, default_runner

__all__ = ["Shell", "ShellBase", "coroutine_of", "run", "synced"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
S = TypeVar("S")


async def run(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run the sync ``fn`` on the process-wide default runner's worker and return its result."""
    return await default_runner().run(fn, *args, **kwargs)


class Shell(Protocol):
    """An async shell: the sync object it wraps, the runner of its calls and the lane they keep order in."""

    _sync: Any
    _runner: Runner
    _lane: Lane | None

    @property
    def sync(self) -> Any:
        """The sync object whose methods the shell's coroutines run."""
        ...


class ShellBase(Generic[S]):
    """Holds the sync object and the runner; each call is one job on one of the runner's workers.

    Calls keep their order in the shell's lane when it has one (``None``: they run as they come).
    """

    def __init__(self, sync: S, runner: Runner | None = None, lane: Lane | None = None) -> None:
        """Wrap ``sync``; its calls run on ``runner`` (default: the process-wide one), in ``lane`` order."""
        self._sync = sync
        self._runner = runner if runner is not None else default_runner()
        self._lane = lane

    @property
    def sync(self) -> S:
        """The sync object this shell runs (its methods block: call them from threads, not from a loop)."""
        return self._sync

    @property
    def runner(self) -> Runner:
        """The worker threads this shell's calls run on."""
        return self._runner

    async def _call(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        return await self._runner.run_in(self._lane, fn, *args, **kwargs)

    async def run_sync(self, fn: Callable[Concatenate[S, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(self.sync, *args, **kwargs)`` as one call of this shell (one hop to a worker thread).

        For a host that needs several sync steps at once (re-read, then render the view):
        they run together, in this shell's order of calls, like SQLAlchemy's
        ``AsyncConnection.run_sync``.
        """
        return await self._call(fn, self._sync, *args, **kwargs)


class coroutine_of(Generic[P, R]):
    """A coroutine method that runs the sync method of the same name as one call of the shell.

    ``append = coroutine_of(Conversation.append)`` in a shell class makes
    ``await shell.append(...)`` run ``shell.sync.append(...)`` on one of the runner's workers.
    """

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        name = method.__name__

        # Runner.run_in written out: every call of the async API is this one coroutine frame.
        async def call(shell: Shell, *args: P.args, **kwargs: P.kwargs) -> R:
            runner = shell._runner
            job = runner.start(shell._lane, getattr(shell._sync, name), args, kwargs)
            try:
                await job.future
            except asyncio.CancelledError:
                await runner.cancelled(job)
            result: R = job.outcome()
            return result

        self._function = functools.update_wrapper(call, method)

    @overload
    def __get__(self, shell: None, owner: type[Any]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, shell: object, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(self, shell: object | None, owner: type[Any]) -> Any:
        if shell is None:
            return self._function  # what help() and the docs show: the sync method's signature and docstring
        return types.MethodType(self._function, shell)


class synced(Generic[T]):
    """A read-only property of a shell that reads the sync object's attribute of the same name.

    The docstring is the sync attribute's, taken from the class named by the shell's
    ``mirrors`` attribute.
    """

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self._name = name
        self.__doc__ = getattr(getattr(owner, "mirrors", object), name, None).__doc__

    @overload
    def __get__(self, shell: None, owner: type[Any]) -> synced[T]: ...

    @overload
    def __get__(self, shell: object, owner: type[Any]) -> T: ...

    def __get__(self, shell: object | None, owner: type[Any]) -> Any:
        if shell is None:
            return self
        return getattr(cast(Shell, shell).sync, self._name)

    def __set__(self, shell: object, value: Any) -> None:
        raise AttributeError(f"{self._name} is read-only: it is the sync object's, changed by its methods")
