"""A coroutine that shows a blocked event loop: how late each of its short sleeps wakes up."""

from __future__ import annotations

import asyncio
import time


async def heartbeat(lags: list[float], period: float, stop: asyncio.Event | None = None) -> None:
    """Sleep ``period`` again and again, adding to ``lags`` how much later than asked each sleep ended.

    Runs until cancelled, or until ``stop`` is set. A call that holds the loop's thread
    shows as one lag about as long as the call.
    """
    while stop is None or not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(period)
        lags.append(time.perf_counter() - start - period)
