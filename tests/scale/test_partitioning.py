"""``contextledger db partition``: the entries table hash-partitioned by conversation on PostgreSQL.

The contract suite runs on a partitioned database too (``postgres_partitioned`` in
``tests/test_store_contract.py``); here: the command itself (rows kept, idempotent,
refused where it cannot apply), and that a restore and the listings of one conversation
read one partition only -- every statement they run is run again under ``EXPLAIN ANALYZE``
(they are ``SELECT``s) and the partitions it scanned are counted (the conversation's id is
known only at run time, so PostgreSQL prunes the others as it executes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from typer.testing import CliRunner

from contextledger import Ledger, Message, SummarizingConversationManager
from contextledger.cli import app
from contextledger.errors import ConfigurationError
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.engine import build_engine, parse_url
from contextledger.stores.sql.partition import is_partitioned, partition_entries, partitions_of


def _fill(url: str, sessions: int = 6) -> None:
    manager = SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent_messages=2, summarizer=lambda ms: f"{len(ms)} messages"
    )
    with Ledger.connect(url) as ledger:
        for s in range(sessions):
            conversation = ledger.conversation(f"s{s}", manager=manager)
            for turn in range(5):
                conversation.append(Message.user(f"q{turn}", message_id=f"s{s}-u{turn}"))
                conversation.append(Message.assistant(f"a{turn}", message_id=f"s{s}-a{turn}"))
            conversation.reduce("manual")


def _everything(url: str) -> dict[str, Any]:
    with Ledger.connect(url) as ledger:
        return {
            s.session_id: (
                [h.model_dump(mode="json") for h in ledger.history(s.session_id)],
                [e.entry_id for e in ledger.conversation(s.session_id).view],
                [r.reduction_id for r in ledger.reductions(s.session_id)],
            )
            for s in ledger.sessions()
        }


@pytest.fixture
def engine(postgres_ledger_url: str) -> Iterator[Engine]:
    built = build_engine(parse_url(postgres_ledger_url))
    yield built
    built.dispose()


def test_the_command_partitions_once_and_keeps_every_row(postgres_ledger_url: str, engine: Engine) -> None:
    _fill(postgres_ledger_url)
    before = _everything(postgres_ledger_url)
    runner = CliRunner()
    done = runner.invoke(app, ["db", "partition", "--url", postgres_ledger_url, "--partitions", "4"])
    assert done.exit_code == 0, done.output
    assert "partitioned cl_entries into 4" in done.output
    with engine.connect() as conn:
        assert is_partitioned(conn)
        assert partitions_of(conn) == [f"cl_entries_p{i}" for i in range(4)]
        counts = conn.execute(text("SELECT tableoid::regclass::text, count(*) FROM cl_entries GROUP BY 1")).all()
    assert sum(n for _, n in counts) == 6 * 10
    assert len(counts) > 1  # the conversations spread over the partitions
    assert _everything(postgres_ledger_url) == before
    again = runner.invoke(app, ["db", "partition", "--url", postgres_ledger_url])
    assert again.exit_code == 0
    assert "already partitioned" in again.output
    # the ledger goes on writing: appends take ids from the same sequence, erasure follows
    with Ledger.connect(postgres_ledger_url) as ledger:
        ledger.conversation("s0").append(Message.user("after", message_id="s0-after"))
        assert ledger.history("s0")[-1].message.message_id == "s0-after"
        assert ledger.delete_session("s1")
    assert set(_everything(postgres_ledger_url)) == {f"s{i}" for i in range(6)} - {"s1"}


def test_the_command_is_refused_where_it_cannot_apply(tmp_path: Any, engine: Engine) -> None:
    done = CliRunner().invoke(app, ["db", "partition", "--url", f"sqlite:///{tmp_path / 'x.db'}"])
    assert done.exit_code != 0
    assert "only a PostgreSQL ledger can be partitioned" in done.output
    for bad in (1, 0, 2000, True):
        with pytest.raises(ConfigurationError):
            partition_entries(engine, bad)
    with engine.connect() as conn:
        assert not is_partitioned(conn)


def _relations(plan: Any) -> set[str]:
    """Relations the executed plan scanned (a partition pruned at run time shows "never executed": 0 loops)."""
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Relation Name" in plan and plan.get("Actual Loops", 0) > 0:
            found.add(str(plan["Relation Name"]))
        for value in plan.values():
            found |= _relations(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= _relations(value)
    return found


def test_a_restore_and_the_listings_read_one_partition(postgres_partitioned_url: str) -> None:
    _fill(postgres_partitioned_url, sessions=12)
    store = SQLStore.from_url(postgres_partitioned_url)
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "cl_entries" in statement and statement.lstrip().upper().startswith(("SELECT", "WITH")):
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        assert store.load("s3", "default") is not None
        store.history("s3", "default")
        store.evictions("s3", "default")
        event.remove(store.engine, "before_cursor_execute", record)
        assert seen, "no statement read the entries"
        with store.engine.connect() as conn:
            for statement, parameters in seen:
                cursor = conn.connection.cursor()
                cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters)  # SELECTs only
                row = cursor.fetchone()
                assert row is not None
                plan = row[0]
                partitions = {r for r in _relations(plan) if r.startswith("cl_entries_p")}
                assert len(partitions) == 1, (statement, json.dumps(plan)[:400])
    finally:
        store.close()
