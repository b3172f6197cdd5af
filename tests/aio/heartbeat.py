"""A coroutine that shows a blocked event loop: how late each of its short sleeps wakes up."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


async def heartbeat(lags: list[float], period: float, stop: asyncio.Event | None = None) -> None:
    """Sleep ``period`` again and again, adding to ``lags`` how much later than asked each sleep ended.

    Runs until cancelled, or until ``stop`` is set. A call that holds the loop's thread
    shows as one lag about as long as the call.
    """
    while stop is None or not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(period)
        lags.append(time.perf_counter() - start - period)


@dataclass(frozen=True)
class Beat:
    """One sleep of :func:`beats`: how late it woke, and how much of that the loop's thread was held off its CPU.

    ``held`` is the time of the beat the thread neither ran nor waited for a CPU, beyond
    the sleep asked for: what a call that waits on the loop's thread (a round trip, a
    lock, a disk flush) costs it. The rest of a lag is the work of the tasks that ran
    in between and, on a busy machine, the wait for a CPU; neither is a blocked loop.
    """

    lag: float
    held: float


def _schedstat() -> tuple[float, float] | None:
    """This thread's seconds on a CPU and waiting for one (Linux's schedstat), or ``None`` where there is none."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            running, waiting, _ = stat.read().split()
    except (OSError, ValueError):
        return None
    return int(running) / 1e9, int(waiting) / 1e9


async def beats(found: list[Beat], period: float, stop: asyncio.Event) -> None:
    """:func:`heartbeat` with each lag split (see :class:`Beat`), until ``stop`` is set.

    Without schedstat (not Linux) a beat's ``held`` is its whole lag: the split is then
    as strict as the lag alone.
    """
    while not stop.is_set():
        before, start = _schedstat(), time.perf_counter()
        await asyncio.sleep(period)
        elapsed, after = time.perf_counter() - start, _schedstat()
        lag = elapsed - period
        if before is None or after is None:
            found.append(Beat(lag, lag))
            continue
        off_cpu = elapsed - (after[0] - before[0]) - (after[1] - before[1])
        # The loop sleeps in its selector only until the beat's own timer is due: beyond
        # the period asked for, time off the CPU and off its run queue was spent held.
        found.append(Beat(lag, max(0.0, off_cpu - period)))
