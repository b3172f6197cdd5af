"""A page of Redis reductions by bisection of their list, against the whole-list read and the raw range, in one run.

    python benchmarks/redis_list_paging.py                  # 10,000 reductions, 9 rounds
    python benchmarks/redis_list_paging.py --reductions 100000 --rounds 7

Builds two identical conversations of ``--reductions`` reductions; the second has its
list's order mark removed, which is what a conversation written before 0.3 looks like
(its pages are read whole, the read every page took before). Then, alternating the cases
each round with the order rotated: ``reductions(last=3)`` and ``reductions(after=the
middle one, limit=100)`` on each, and the floor any index could reach for the second: one
raw ``LRANGE`` of the same 100 rows plus their decoding (what a sorted-set index by time
would still have to do after locating them). Prints medians of wall and of client CPU
time, and the ratios. The server is started by ``_servers.py`` (or named by
``CONTEXTLEDGER_TEST_REDIS_URL``) and stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from redis import Redis

from _servers import median, redis_url, versions
from contextledger.core.changeset import Changeset
from contextledger.model.paging import Page, cursor
from contextledger.model.records import Reduction
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.codec import reduction_from
from contextledger.stores.redis.keys import ConversationKeys

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def build(store: RedisStore, session: str, count: int) -> None:
    for version in range(count):
        reduction = Reduction(
            session_id=session,
            agent_id="a",
            trigger="manual",
            strategy="sliding_window",
            created_at=BASE + timedelta(seconds=version),
            messages_before=40,
            messages_after=30,
            tokens_before=4000,
            tokens_after=3000,
            evicted=tuple(uuid.uuid4().hex for _ in range(10)),
            version=version + 1,
        )
        store.commit(Changeset(session_id=session, agent_id="a", expected_version=version, reduction=reduction))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reductions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with redis_url(cluster=False) as found:
        if found is None:
            raise SystemExit("no Redis available")
        prefix = f"clbench-lists-{uuid.uuid4().hex[:8]}"
        store = RedisStore.from_url(found[0], key_prefix=prefix)
        raw = Redis.from_url(found[0])
        try:
            build(store, "marked", args.reductions)
            build(store, "legacy", args.reductions)
            raw.hdel(ConversationKeys.of(prefix, "legacy", "a").state, "red_at")
            middle = args.reductions // 2
            after = cursor(store.reductions("marked", "a", page=Page(after=None, limit=middle + 1))[-1])
            red_key = ConversationKeys.of(prefix, "marked", "a").red
            cases: dict[str, Callable[[str], Any]] = {
                "reductions(last=3)": lambda s: store.reductions(s, "a", page=Page(last=3)),
                "reductions(after=middle, limit=100)": lambda s: store.reductions(
                    s, "a", page=Page(after=after, limit=100)
                ),
            }
            runs: list[tuple[str, str]] = [(name, session) for name in cases for session in ("marked", "legacy")]
            runs.append(("floor", "raw"))

            def floor() -> Any:
                rows: list[bytes] = raw.lrange(red_key, middle + 1, middle + 100)  # type: ignore[assignment]
                return [reduction_from(r, red_key) for r in rows]

            samples: dict[tuple[str, str], list[tuple[float, float]]] = {run: [] for run in runs}
            for r in range(args.rounds):
                shift = r % len(runs)
                for name, session in runs[shift:] + runs[:shift]:
                    wall, cpu = time.perf_counter(), time.process_time()
                    if name == "floor":
                        floor()
                    else:
                        cases[name](session)
                    samples[(name, session)].append((time.perf_counter() - wall, time.process_time() - cpu))

            def med(run: tuple[str, str]) -> tuple[float, float]:
                return median([w for w, _ in samples[run]]), median([c for _, c in samples[run]])

            print(f"Redis: {args.reductions:,} reductions, {args.rounds} rounds")
            print("| read | range: wall ms | CPU ms | whole list: wall ms | CPU ms | wall ratio | CPU ratio |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name in cases:
                (iw, ic), (lw, lc) = med((name, "marked")), med((name, "legacy"))
                print(
                    f"| {name} | {iw * 1e3:,.2f} | {ic * 1e3:,.2f} | {lw * 1e3:,.1f} | {lc * 1e3:,.1f}"
                    f" | {iw / lw:.4f}x | {ic / lc:.4f}x |"
                )
            (fw, fc), (mw, mc) = med(("floor", "raw")), med(("reductions(after=middle, limit=100)", "marked"))
            print(
                f"Floor, raw LRANGE of the same 100 rows decoded: {fw * 1e3:,.2f} ms wall, {fc * 1e3:,.2f} ms CPU;"
                f" the bisected page is {mw / fw:.2f}x its wall time, {mc / fc:.2f}x its CPU time."
            )
            print(f"Load average (1 min): {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.")
            print(versions())
        finally:
            for session in ("marked", "legacy"):
                store.delete_session(session)
            store.close()
            raw.close()


if __name__ == "__main__":
    main()
