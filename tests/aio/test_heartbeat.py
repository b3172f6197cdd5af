"""The heartbeat's split of a lag: a call that waits on the loop's thread shows as held, work does not."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tests.aio.heartbeat import Beat, beats

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the split reads Linux's schedstat")


def _during(hold: float, *, wait: bool) -> list[Beat]:
    """Beats taken while one task holds the loop's thread ``hold`` seconds, sleeping (``wait``) or computing."""

    async def main() -> list[Beat]:
        found: list[Beat] = []
        stop = asyncio.Event()
        beat = asyncio.create_task(beats(found, 0.005, stop))
        await asyncio.sleep(0.02)
        if wait:
            time.sleep(hold)  # a call that waits on the loop's thread: a lock, a round trip
        else:
            deadline = time.thread_time() + hold
            while time.thread_time() < deadline:  # work: the loop's thread on its CPU
                pass
        await asyncio.sleep(0.02)
        stop.set()
        await beat
        return found

    return asyncio.run(main())


def test_a_wait_on_the_loops_thread_shows_as_held() -> None:
    found = _during(0.3, wait=True)
    worst = max(found, key=lambda b: b.lag)
    assert worst.lag >= 0.29
    assert worst.held >= 0.25, worst


def test_work_on_the_loops_thread_is_a_lag_but_not_held() -> None:
    found = _during(0.3, wait=False)
    worst = max(found, key=lambda b: b.lag)
    assert worst.lag >= 0.29
    # On a busy machine part of it is the wait for a CPU, counted apart; none is held.
    assert worst.held < 0.1, worst
