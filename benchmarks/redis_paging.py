"""A page of Redis history through the seq index, against the whole-conversation read it replaced, in one run.

    python benchmarks/redis_paging.py                      # 10,000 entries, 9 rounds
    python benchmarks/redis_paging.py --entries 100000 --rounds 7
    python benchmarks/redis_paging.py --cluster            # on a 3-master Redis Cluster

Builds two identical conversations of ``--entries`` one-message entries; the second has
its seq index removed, which is what a conversation written before 0.3 looks like (its
pages are read whole, the read every page took before the index). Then, alternating the
cases each round with the order rotated: ``history(last=3)``, ``history(after=N/2,
limit=100)`` and ``iter_history`` in pages of 1,000 on each. Prints medians of wall and of
client CPU time, and the ratio of the index to the whole read. The server is started by
``_servers.py`` (or named by ``CONTEXTLEDGER_TEST_REDIS_URL``) and stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.cluster import RedisCluster

from _details import versions
from _servers import median, redis_url
from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.model.paging import Page
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys


def build(store: RedisStore, session: str, entries: int) -> None:
    conv = Conversation(store, session, "a")
    for start in range(0, entries, 1000):
        conv.append(*(Message.user(f"message {n} " + "x" * 80) for n in range(start, min(entries, start + 1000))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cluster", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with redis_url(cluster=args.cluster) as found:
        if found is None:
            raise SystemExit("no Redis available")
        prefix = f"clbench-paging-{uuid.uuid4().hex[:8]}"
        store = RedisStore.from_url(found[0], key_prefix=prefix)
        ledger = Ledger(store)
        try:
            build(store, "indexed", args.entries)
            build(store, "legacy", args.entries)
            scheme, _, rest = found[0].partition("://")
            raw = (
                RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
                if args.cluster
                else Redis.from_url(found[0])
            )
            raw.delete(ConversationKeys.of(prefix, "legacy", "a").seq)
            raw.close()
            middle = args.entries // 2
            cases: dict[str, Callable[[str], Any]] = {
                "history(last=3)": lambda s: store.history(s, "a", page=Page(last=3)),
                "history(after=N/2, limit=100)": lambda s: store.history(s, "a", page=Page(after=middle, limit=100)),
                "iter_history, pages of 1,000": lambda s: sum(1 for _ in ledger.iter_history(s, "a")),
            }
            runs = [(name, session) for name in cases for session in ("indexed", "legacy")]
            samples: dict[tuple[str, str], list[tuple[float, float]]] = {run: [] for run in runs}
            for r in range(args.rounds):
                shift = r % len(runs)
                for name, session in runs[shift:] + runs[:shift]:
                    wall, cpu = time.perf_counter(), time.process_time()
                    cases[name](session)
                    samples[(name, session)].append((time.perf_counter() - wall, time.process_time() - cpu))
            print(f"{'Redis Cluster' if args.cluster else 'Redis'}: {args.entries:,} entries, {args.rounds} rounds")
            print("| read | index: wall ms | CPU ms | whole read: wall ms | CPU ms | wall ratio | CPU ratio |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name in cases:
                iw = median([w for w, _ in samples[(name, "indexed")]])
                ic = median([c for _, c in samples[(name, "indexed")]])
                lw = median([w for w, _ in samples[(name, "legacy")]])
                lc = median([c for _, c in samples[(name, "legacy")]])
                print(
                    f"| {name} | {iw * 1e3:,.2f} | {ic * 1e3:,.2f} | {lw * 1e3:,.1f} | {lc * 1e3:,.1f}"
                    f" | {iw / lw:.4f}x | {ic / lc:.4f}x |"
                )
            print(f"Load average (1 min): {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.")
            print(versions())
        finally:
            for session in ("indexed", "legacy"):
                store.delete_session(session)
            store.close()


if __name__ == "__main__":
    main()
