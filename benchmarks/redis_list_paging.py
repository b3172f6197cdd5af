"""A page of Redis reductions, summaries or evictions by their index, against the whole read and a bare read.

    python benchmarks/redis_list_paging.py                  # 10,000 reductions, 9 rounds
    python benchmarks/redis_list_paging.py --reductions 100000 --rounds 7
    python benchmarks/redis_list_paging.py --reductions 0 --summaries 100000 --rounds 7
    python benchmarks/redis_list_paging.py --reductions 0 --evictions 100000 --rounds 7

Builds two identical conversations of ``--reductions`` reductions; the second has its
list's order mark removed, which is what a conversation written before 0.3 looks like
(its pages are read whole, the read every page took before). Then, alternating the cases
each round with the order rotated: ``reductions(last=3)`` and ``reductions(after=the
middle one, limit=100)`` on each, and the floor any index could reach for the second: one
raw ``LRANGE`` of the same 100 rows plus their decoding (what a sorted-set index by time
would still have to do after locating them). Prints medians of wall and of client CPU
time, and the ratios. The server is started by ``_servers.py`` (or named by
``CONTEXTLEDGER_TEST_REDIS_URL``) and stopped at the end.

With ``--summaries N``: two conversations of N summaries, the second without its
creation-time index (what one written before 0.3 looks like: read whole); then
``summaries(last=3)`` and ``summaries(after=the middle one, limit=100)`` on each, and the
bare read of those 100 rows: one raw ``HMGET`` of their ids plus the same decoding. The
first summary of each is committed by the store; the others are written by a pipeline in
exactly the layout the commit script leaves (``sum`` hash field, ``sumat`` member), which
takes seconds where 100,000 commits would take minutes.

With ``--evictions N``: two conversations of N evicted messages (N / 10 reductions a second
apart, each evicting 10), committed by the store; the second has its eviction index's mark
removed (what one written before 0.3 looks like: read whole). Then ``evictions(last=3)``
and ``evictions(after=the middle one, limit=100)`` on each, and the bare read of those 100
rows: one pipeline of raw ``HMGET`` of their records and contents and ``LRANGE`` of their
10 reductions, plus the same decoding. One reduction in 100 is ``reactive`` (1% of the
evictions, the others ``per_turn``): ``evictions(trigger="reactive", after=the middle
reactive one, limit=100)`` on each, against the bare read of those rows (``HMGET`` of the
entries, ``LINDEX`` of each of their reductions, decoded) -- what a walk of the whole
index skipping other triggers would read 100 times over.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from redis import Redis

from _details import versions
from _servers import median, redis_url
from contextledger import Message, ViewEntry
from contextledger.core.changeset import Changeset
from contextledger.model.paging import Cursor, Page, cursor
from contextledger.model.records import Reduction, SummaryEntry
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.codec import MessageRow, reduction_from, summary_from, time_score
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


def build_summaries(store: RedisStore, raw: Redis, session: str, count: int) -> list[str]:
    """A conversation of ``count`` summaries a second apart (see the module docstring); their ids."""
    keys = ConversationKeys.of(store.key_prefix, session, "a")
    first = Message.user("m0")
    store.commit(
        Changeset(
            session_id=session,
            agent_id="a",
            expected_version=0,
            appends=(ViewEntry(entry_id=first.message_id, seq=0, message=first, tokens=1),),
            next_seq=1,
        )
    )
    red = Reduction(
        session_id=session,
        agent_id="a",
        trigger="manual",
        strategy="summarizing",
        created_at=BASE,
        messages_before=1,
        messages_after=0,
        tokens_before=1,
        tokens_after=1,
        evicted=(first.message_id,),
        version=2,
    )
    ids: list[str] = []
    pipe = raw.pipeline(transaction=False)
    for n in range(count):
        summary = SummaryEntry(
            session_id=session,
            agent_id="a",
            seq=0,
            content=f"The user asked about order {n}; the assistant found it and explained the delivery date.",
            summarizer="bench",
            reduction_id=red.reduction_id,
            replaces=(first.message_id,),
            tokens=20,
            created_at=BASE + timedelta(seconds=n),
        )
        ids.append(summary.summary_id)
        if n == 0:
            store.commit(
                Changeset(session_id=session, agent_id="a", expected_version=1, summary=summary, reduction=red)
            )
            continue
        pipe.hset(keys.sum, summary.summary_id, summary.model_dump_json())
        pipe.zadd(keys.sumat, {summary.summary_id: int(time_score(summary.created_at))})
        if n % 5000 == 0:
            pipe.execute()
    pipe.execute()
    return ids


def summaries_table(store: RedisStore, raw: Redis, count: int, rounds: int) -> None:
    """Time and print the summaries cases (see the module docstring)."""
    ids = build_summaries(store, raw, "sums-indexed", count)
    build_summaries(store, raw, "sums-legacy", count)
    raw.delete(ConversationKeys.of(store.key_prefix, "sums-legacy", "a").sumat)
    middle = count // 2
    whole = store.summaries("sums-indexed", "a", page=Page(limit=middle + 1))
    after = cursor(whole[-1])
    keys = ConversationKeys.of(store.key_prefix, "sums-indexed", "a")
    page_ids = ids[middle + 1 : middle + 101]

    def bare() -> Any:
        rows: list[bytes] = raw.hmget(keys.sum, page_ids)  # type: ignore[assignment]
        return [summary_from(r, {}, keys.sum) for r in rows]

    assert [s.summary_id for s in store.summaries("sums-indexed", "a", page=Page(after=after, limit=100))] == page_ids
    compare("summaries", store.summaries, after, bare, count, rounds, "raw HMGET of the same 100 summaries decoded")


def build_evictions(store: RedisStore, session: str, count: int) -> list[str]:
    """A conversation of ``count`` evicted messages, 10 per reduction a second apart; their ids in order."""
    messages = [Message.user(f"The user asked about order {n}; the assistant answered.") for n in range(count + 1)]
    version = 0
    for start in range(0, len(messages), 1000):
        chunk = messages[start : start + 1000]
        appends = tuple(
            ViewEntry(entry_id=m.message_id, seq=start + i, message=m, tokens=12) for i, m in enumerate(chunk)
        )
        version = store.commit(
            Changeset(
                session_id=session,
                agent_id="a",
                expected_version=version,
                appends=appends,
                next_seq=start + len(chunk),
            )
        )
    ids = [m.message_id for m in messages[:count]]
    for n, start in enumerate(range(0, count, 10)):
        evicted = tuple(ids[start : start + 10])
        reduction = Reduction(
            session_id=session,
            agent_id="a",
            trigger="reactive" if n % 100 == 50 else "per_turn",
            strategy="sliding_window",
            created_at=BASE + timedelta(seconds=n),
            messages_before=40,
            messages_after=30,
            tokens_before=4000,
            tokens_after=3000,
            evicted=evicted,
            version=version + 1,
        )
        version = store.commit(
            Changeset(session_id=session, agent_id="a", expected_version=version, evict=evicted, reduction=reduction)
        )
    return ids


def evictions_table(store: RedisStore, raw: Redis, count: int, rounds: int) -> None:
    """Time and print the evictions cases (see the module docstring)."""
    ids = build_evictions(store, "ev-indexed", count)
    build_evictions(store, "ev-legacy", count)
    raw.hdel(ConversationKeys.of(store.key_prefix, "ev-legacy", "a").state, "ev_v")
    middle = count // 2
    after = cursor(store.evictions("ev-indexed", "a", page=Page(after=None, limit=middle + 1))[-1])
    keys = ConversationKeys.of(store.key_prefix, "ev-indexed", "a")
    page_ids = ids[middle + 1 : middle + 101]
    first_red = (middle + 1) // 10  # the reductions list holds one row per 10 evictions, in order

    def bare() -> Any:
        pipe = raw.pipeline(transaction=False)
        pipe.hmget(keys.msg, page_ids)
        pipe.hmget(keys.content, page_ids)
        pipe.lrange(keys.red, first_red, first_red + 10)
        records, contents, reds = pipe.execute()
        rows = [MessageRow.decode(i, r, c, {}, keys.msg) for i, r, c in zip(page_ids, records, contents, strict=True)]
        return rows, [reduction_from(r, keys.red) for r in reds]

    got = store.evictions("ev-indexed", "a", page=Page(after=after, limit=100))
    assert [e.entry_id for e in got] == page_ids
    compare(
        "evictions",
        store.evictions,
        after,
        bare,
        count,
        rounds,
        "raw HMGET of the same 100 entries and LRANGE of their reductions, decoded",
    )
    filtered_table(store, raw, ids, count, rounds)


def filtered_table(store: RedisStore, raw: Redis, ids: list[str], count: int, rounds: int) -> None:
    """Time and print a middle page of the 1% ``reactive`` evictions (see the module docstring)."""
    reactive = [i for n, i in enumerate(ids) if n // 10 % 100 == 50]
    if len(reactive) < 2:
        return
    rows = store.evictions("ev-indexed", "a", trigger="reactive")
    assert [e.entry_id for e in rows] == reactive
    middle = len(rows) // 2 - 1
    after = cursor(rows[middle])
    keys = ConversationKeys.of(store.key_prefix, "ev-indexed", "a")
    page_ids = reactive[middle + 1 : middle + 101]
    where = {i: n // 10 for n, i in enumerate(ids)}  # the list holds one row per reduction, in order
    positions = sorted({where[i] for i in page_ids})

    def bare() -> Any:
        pipe = raw.pipeline(transaction=False)
        pipe.hmget(keys.msg, page_ids)
        pipe.hmget(keys.content, page_ids)
        for p in positions:
            pipe.lindex(keys.red, p)
        records, contents, *reds = pipe.execute()
        decoded = [
            MessageRow.decode(i, r, c, {}, keys.msg) for i, r, c in zip(page_ids, records, contents, strict=True)
        ]
        return decoded, [reduction_from(r, keys.red) for r in reds]

    name = "evictions(trigger=1%, after=middle, limit=100)"
    page = Page(after=after, limit=100)
    got = store.evictions("ev-indexed", "a", trigger="reactive", page=page)
    assert [e.entry_id for e in got] == page_ids
    runs: dict[tuple[str, str], Callable[[], Any]] = {
        (name, session): partial(store.evictions, session, "a", trigger="reactive", page=page)
        for session in ("ev-indexed", "ev-legacy")
    }
    runs[("bare", "raw")] = bare
    med = measure(runs, rounds)
    (iw, ic), (lw, lc), (bw, bc) = med[(name, "ev-indexed")], med[(name, "ev-legacy")], med[("bare", "raw")]
    print(f"Redis: {count:,} evictions, {len(reactive):,} of them reactive, {rounds} rounds")
    print("| read | index: wall ms | CPU ms | whole read: wall ms | CPU ms | wall ratio | CPU ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {name} | {iw * 1e3:,.2f} | {ic * 1e3:,.2f} | {lw * 1e3:,.1f} | {lc * 1e3:,.1f}"
        f" | {iw / lw:.4f}x | {ic / lc:.4f}x |"
    )
    print(
        f"Bare read, raw HMGET of the same {len(page_ids)} entries and LINDEX of their {len(positions)} reductions,"
        f" decoded: {bw * 1e3:,.2f} ms wall, {bc * 1e3:,.2f} ms CPU;"
        f" the indexed page is {iw / bw:.2f}x its wall time, {ic / bc:.2f}x its CPU time."
    )


def compare(
    listing: str,
    read: Callable[..., Any],
    after: Cursor,
    bare: Callable[[], Any],
    count: int,
    rounds: int,
    bare_is: str,
) -> None:
    """Time ``read`` (a listing of ``store``) through the index, read whole, and ``bare``; print the table.

    The indexed conversation is ``<prefix>-indexed``, the one without its index ``<prefix>-legacy``.
    """
    prefix = {"summaries": "sums", "evictions": "ev"}[listing]
    last, middle = f"{listing}(last=3)", f"{listing}(after=middle, limit=100)"
    runs: dict[tuple[str, str], Callable[[], Any]] = {}
    for session in (f"{prefix}-indexed", f"{prefix}-legacy"):
        runs[(last, session)] = partial(read, session, "a", page=Page(last=3))
        runs[(middle, session)] = partial(read, session, "a", page=Page(after=after, limit=100))
    runs[("bare", "raw")] = bare
    med = measure(runs, rounds)
    print(f"Redis: {count:,} {listing}, {rounds} rounds")
    print("| read | index: wall ms | CPU ms | whole read: wall ms | CPU ms | wall ratio | CPU ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in (last, middle):
        (iw, ic), (lw, lc) = med[(name, f"{prefix}-indexed")], med[(name, f"{prefix}-legacy")]
        print(
            f"| {name} | {iw * 1e3:,.2f} | {ic * 1e3:,.2f} | {lw * 1e3:,.1f} | {lc * 1e3:,.1f}"
            f" | {iw / lw:.4f}x | {ic / lc:.4f}x |"
        )
    (bw, bc), (mw, mc) = med[("bare", "raw")], med[(middle, f"{prefix}-indexed")]
    print(
        f"Bare read, {bare_is}: {bw * 1e3:,.2f} ms wall, {bc * 1e3:,.2f} ms CPU;"
        f" the indexed page is {mw / bw:.2f}x its wall time, {mc / bc:.2f}x its CPU time."
    )


def measure(runs: dict[tuple[str, str], Callable[[], Any]], rounds: int) -> dict[tuple[str, str], tuple[float, float]]:
    """Median wall and client CPU seconds of each run, the runs alternated each round with the order rotated."""
    order = list(runs)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {run: [] for run in order}
    for r in range(rounds):
        shift = r % len(order)
        for run in order[shift:] + order[:shift]:
            wall, cpu = time.perf_counter(), time.process_time()
            runs[run]()
            samples[run].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {run: (median([w for w, _ in s]), median([c for _, c in s])) for run, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reductions", type=int, default=10_000)
    parser.add_argument("--summaries", type=int, default=0, help="also page this many summaries (0: none)")
    parser.add_argument("--evictions", type=int, default=0, help="also page this many evictions (0: none)")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with redis_url(cluster=False) as found:
        if found is None:
            raise SystemExit("no Redis available")
        prefix = f"clbench-lists-{uuid.uuid4().hex[:8]}"
        # a whole read of 100,000 evictions outlasts the default socket timeout on a loaded machine
        store = RedisStore.from_url(found[0], key_prefix=prefix, socket_timeout=300)
        raw = Redis.from_url(found[0])
        try:
            if args.summaries:
                summaries_table(store, raw, args.summaries, args.rounds)
            if args.evictions:
                evictions_table(store, raw, args.evictions, args.rounds)
            if args.reductions:
                reductions_table(store, raw, prefix, args.reductions, args.rounds)
            print(f"Load average (1 min): {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.")
            print(versions())
        finally:
            for session in ("marked", "legacy", "sums-indexed", "sums-legacy", "ev-indexed", "ev-legacy"):
                store.delete_session(session)
            store.close()
            raw.close()


def reductions_table(store: RedisStore, raw: Redis, prefix: str, count: int, rounds: int) -> None:
    """Time and print the reductions cases (see the module docstring)."""
    build(store, "marked", count)
    build(store, "legacy", count)
    raw.hdel(ConversationKeys.of(prefix, "legacy", "a").state, "red_at")
    middle = count // 2
    after = cursor(store.reductions("marked", "a", page=Page(after=None, limit=middle + 1))[-1])
    red_key = ConversationKeys.of(prefix, "marked", "a").red

    def floor() -> Any:
        rows: list[bytes] = raw.lrange(red_key, middle + 1, middle + 100)  # type: ignore[assignment]
        return [reduction_from(r, red_key) for r in rows]

    names = ("reductions(last=3)", "reductions(after=middle, limit=100)")
    runs: dict[tuple[str, str], Callable[[], Any]] = {}
    for session in ("marked", "legacy"):
        runs[(names[0], session)] = partial(store.reductions, session, "a", page=Page(last=3))
        runs[(names[1], session)] = partial(store.reductions, session, "a", page=Page(after=after, limit=100))
    runs[("floor", "raw")] = floor
    med = measure(runs, rounds)
    print(f"Redis: {count:,} reductions, {rounds} rounds")
    print("| read | range: wall ms | CPU ms | whole list: wall ms | CPU ms | wall ratio | CPU ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        (iw, ic), (lw, lc) = med[(name, "marked")], med[(name, "legacy")]
        print(
            f"| {name} | {iw * 1e3:,.2f} | {ic * 1e3:,.2f} | {lw * 1e3:,.1f} | {lc * 1e3:,.1f}"
            f" | {iw / lw:.4f}x | {ic / lc:.4f}x |"
        )
    (fw, fc), (mw, mc) = med[("floor", "raw")], med[(names[1], "marked")]
    print(
        f"Floor, raw LRANGE of the same 100 rows decoded: {fw * 1e3:,.2f} ms wall, {fc * 1e3:,.2f} ms CPU;"
        f" the bisected page is {mw / fw:.2f}x its wall time, {mc / fc:.2f}x its CPU time."
    )


if __name__ == "__main__":
    main()
