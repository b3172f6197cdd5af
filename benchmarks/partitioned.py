"""History that outgrows one table: restore and append at 10 million entries, against 100,000.

    scripts/bench --scale                       # 10,000 sessions x 1,000 entries, partitioned, vs 100 x 1,000
    python benchmarks/partitioned.py --sessions 1000 --rounds 50     # a smaller run

One conversation of ``--entries`` entries (all but a 40-message window evicted by one
sliding-window reduction) is written through the library; its rows -- session,
conversation state, entries, reduction, commit log -- are then copied with bulk
``COPY ... FROM STDIN`` under new session and conversation ids into:

* ``base``: today's schema, ``--base-sessions`` conversations (100,000 entries by default);
* ``base_partitioned``: the same, after ``contextledger db partition`` (the partitioning's own cost);
* ``big``: ``--sessions`` conversations (10 million entries by default), partitioned
  into ``--partitions`` hash partitions before the copy.

Then, interleaved round by round so drift on a shared machine hits all alike: a restore
(``SQLStore.load`` of a random session's window) and an append (one message committed
to a random conversation). Reported: the time to generate the data, medians and 95th
percentiles, and each database's ratio to ``base``; the machine's load average beside them.
PostgreSQL runs with ``fsync=on``, ``synchronous_commit=off`` (as ``scripts/bench``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import psycopg  # noqa: E402

from contextledger import Ledger, Message, SlidingWindowConversationManager  # noqa: E402
from contextledger.stores.sql import SQLStore, upgrade  # noqa: E402
from contextledger.stores.sql.engine import build_engine, parse_url  # noqa: E402
from contextledger.stores.sql.partition import partition_entries  # noqa: E402

SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "off",
    "full_page_writes": "on",
    "shared_buffers": "512MB",
    "maintenance_work_mem": "512MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
}
TEMPLATE = "template-session"


def _template(url: str, entries: int) -> None:
    """Write the template conversation through the library: ``entries`` messages, a 40-message window."""
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation(TEMPLATE, manager=SlidingWindowConversationManager(window_size=40))
        filler = "lorem ipsum dolor sit amet " * 6
        batch = 100
        for first in range(0, entries, batch):
            conversation.append(
                *(
                    Message.user(f"{i} {filler}", message_id=f"m{i:07d}")
                    if i % 2 == 0
                    else Message.assistant(f"{i} {filler}", message_id=f"m{i:07d}")
                    for i in range(first, min(entries, first + batch))
                )
            )
        conversation.reduce("manual")


def _conninfo(url: str) -> str:
    parsed = parse_url(url)
    return f"host={parsed.host} port={parsed.port} user={parsed.username} dbname={parsed.database}"


def _tables(conn: psycopg.Connection[Any]) -> list[str]:
    """Tables holding rows of a conversation (a ``conversation_id`` column), entries first."""
    rows = conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE column_name = 'conversation_id' "
        "AND table_schema = 'public' AND table_name NOT LIKE 'cl_entries_p%' ORDER BY table_name"
    ).fetchall()
    return sorted((str(r[0]) for r in rows), key=lambda t: t != "cl_entries")


def _read_template(url: str) -> dict[str, Any]:
    with psycopg.connect(_conninfo(url)) as conn:
        (session,) = conn.execute("SELECT created_at FROM cl_sessions WHERE session_id = %s", (TEMPLATE,)).fetchall()
        cur = conn.execute("SELECT * FROM cl_conversations WHERE session_id = %s", (TEMPLATE,))
        conversation_columns = [d.name for d in cur.description or ()]
        (conversation,) = cur.fetchall()
        conversation_id = conversation[conversation_columns.index("id")]
        tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}
        for table in _tables(conn):
            cur = conn.execute(f"SELECT * FROM {table} WHERE conversation_id = %s", (conversation_id,))
            tables[table] = ([d.name for d in cur.description or ()], cur.fetchall())
    return {"session": session, "conversation": (conversation_columns, conversation), "tables": tables}


def _copy(url: str, template: dict[str, Any], sessions: int, prefix: str) -> dict[str, float]:
    """COPY ``sessions`` copies of the template conversation into the database at ``url``."""
    started = time.perf_counter()
    rows = 0
    with psycopg.connect(_conninfo(url)) as conn:
        first = _max_id(conn, "cl_conversations") + 1
        names = [f"{prefix}-{i:06d}" for i in range(sessions)]
        with conn.cursor() as cur, cur.copy("COPY cl_sessions (session_id, created_at) FROM STDIN") as copy:
            for name in names:
                copy.write_row((name, template["session"][0]))
        columns, row = template["conversation"]
        with conn.cursor() as cur, cur.copy(f"COPY cl_conversations ({', '.join(columns)}) FROM STDIN") as copy:
            for i, name in enumerate(names):
                named = dict(zip(columns, row, strict=True)) | {"id": first + i, "session_id": name}
                copy.write_row([_copyable(named[c]) for c in columns])
        for table, (columns, template_rows) in template["tables"].items():
            has_id = "id" in columns
            next_id = _max_id(conn, table) + 1 if has_id else 0
            plain = [[_copyable(v) for v in r] for r in template_rows]
            conv_at = columns.index("conversation_id")
            id_at = columns.index("id") if has_id else -1
            with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for i in range(sessions):
                    for copied in plain:
                        copied[conv_at] = first + i
                        if has_id:
                            copied[id_at] = next_id
                            next_id += 1
                        copy.write_row(copied)
                        rows += 1
            if has_id:
                conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {next_id})")
        conn.commit()
    copy_seconds = time.perf_counter() - started
    analyzed = time.perf_counter()
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return {
        "rows": float(rows),
        "copy_s": round(copy_seconds, 1),
        "vacuum_analyze_s": round(time.perf_counter() - analyzed, 1),
    }


def _max_id(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _copyable(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value


def _database(admin: str, name: str) -> str:
    with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return admin.rsplit("/", 1)[0] + f"/{name}"


def _partition(url: str, partitions: int) -> float:
    started = time.perf_counter()
    engine = build_engine(parse_url(url), statement_timeout=None)
    try:
        partition_entries(engine, partitions)
    finally:
        engine.dispose()
    return round(time.perf_counter() - started, 2)


def _rounds(stores: dict[str, tuple[SQLStore, list[str]]], rounds: int, seed: int) -> dict[str, dict[str, list[float]]]:
    rng = random.Random(seed)
    samples: dict[str, dict[str, list[float]]] = {name: {"restore": [], "append": []} for name in stores}
    ledgers = {name: Ledger(store) for name, (store, _) in stores.items()}
    order = list(stores)
    for r in range(rounds):
        rng.shuffle(order)
        for name in order:
            store, sessions = stores[name]
            session = rng.choice(sessions)
            started = time.perf_counter()
            snapshot = store.load(session, "default")
            samples[name]["restore"].append(time.perf_counter() - started)
            assert snapshot is not None and len(snapshot.entries) >= 40
            conversation = ledgers[name].conversation(rng.choice(sessions))
            message = Message.user(f"round {r}", message_id=f"bench-{uuid.uuid4().hex}")
            started = time.perf_counter()
            conversation.append(message)
            samples[name]["append"].append(time.perf_counter() - started)
    return samples


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(1000 * statistics.median(ordered), 3),
        "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 3),
    }


def main(argv: list[str] | None = None) -> None:
    """Build the databases, measure, print the figures as JSON lines and a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--base-sessions", type=int, default=100)
    parser.add_argument("--entries", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    from tests.plugins.postgres_server import start_postgres

    server = start_postgres(settings=SETTINGS)
    try:
        admin = server.url
        urls = {name: _database(admin, name) for name in ("base", "base_partitioned", "big")}
        for url in urls.values():
            upgrade(url)
        _template(urls["base"], args.entries)
        template = _read_template(urls["base"])
        report: dict[str, Any] = {"load_before": os.getloadavg(), "entries_per_session": args.entries}
        report["base"] = _copy(urls["base"], template, args.base_sessions, "s")
        report["base_partitioned"] = _copy(urls["base_partitioned"], template, args.base_sessions, "s")
        report["base_partitioned"]["partition_s"] = _partition(urls["base_partitioned"], args.partitions)
        partitioned_s = _partition(urls["big"], args.partitions)
        report["big"] = _copy(urls["big"], template, args.sessions, "s") | {"partition_s": partitioned_s}
        print(json.dumps(report), flush=True)
        stores = {
            "base": (SQLStore.from_url(urls["base"]), [f"s-{i:06d}" for i in range(args.base_sessions)]),
            "base_partitioned": (
                SQLStore.from_url(urls["base_partitioned"]),
                [f"s-{i:06d}" for i in range(args.base_sessions)],
            ),
            "big": (SQLStore.from_url(urls["big"]), [f"s-{i:06d}" for i in range(args.sessions)]),
        }
        try:
            _rounds(stores, max(10, args.rounds // 10), args.seed + 1)  # warm-up, not reported
            samples = _rounds(stores, args.rounds, args.seed)
        finally:
            for store, _ in stores.values():
                store.close()
        base = {op: _summary(samples["base"][op]) for op in ("restore", "append")}
        for name in stores:
            for op in ("restore", "append"):
                figures = _summary(samples[name][op])
                figures["ratio_to_base"] = round(figures["median_ms"] / base[op]["median_ms"], 2)
                print(json.dumps({"database": name, "operation": op, **figures}), flush=True)
        print(json.dumps({"load_after": os.getloadavg()}), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
