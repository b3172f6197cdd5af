"""SQL-specific behaviour: engine settings, URL forms, the first-insert race, cascading delete."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from contextledger import Changeset, Ledger, Message, ReductionPlan, SummaryDraft, ViewEntry
from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConcurrencyConflict
from contextledger.history.lifecycle import erase
from contextledger.model.records import LineageLink, utcnow
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.engine import build_engine, parse_url
from contextledger.stores.sql.models import Base


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    store = SQLStore.from_url(f"sqlite:///{tmp_path / 'x.db'}", busy_timeout=7.5)
    try:
        with store.engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 7500
    finally:
        store.close()


def test_in_memory_sqlite_works_across_calls() -> None:
    with Ledger.connect("sqlite://") as ledger:
        ledger.conversation("s").append(Message.user("kept"))
        assert [h.message.plain_text for h in ledger.history("s")] == ["kept"]


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
def test_postgres_schemes_mean_psycopg(scheme: str) -> None:
    assert parse_url(f"{scheme}://u:p@127.0.0.1:5432/db").drivername == "postgresql+psycopg"


def test_postgres_url_forms_and_pool_options(postgres_ledger_url: str) -> None:
    plain = make_url(postgres_ledger_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with Ledger.connect(plain, pool_size=3, max_overflow=0, echo=False) as ledger:
        store = ledger.store
        assert isinstance(store, SQLStore)
        assert store.engine.dialect.driver == "psycopg"
        assert store.engine.pool.size() == 3  # type: ignore[attr-defined]
        ledger.conversation("s").append(Message.user("hi"))
        assert ledger.agents("s") == ["default"]


def test_wrapping_an_engine_leaves_it_open(ledger_url: str) -> None:
    engine = build_engine(parse_url(ledger_url))
    store = SQLStore(engine)
    Conversation(store, "s", "a").append(Message.user("hi"))
    store.close()
    with engine.connect() as conn:  # still usable: the application owns it
        assert conn.execute(text("SELECT count(*) FROM cl_entries")).scalar() == 1
    engine.dispose()


def _race_first_commits(store: SQLStore, session: str) -> list[object]:
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def create(name: str) -> None:
        message = Message.user(name)
        changeset = Changeset(
            session_id=session,
            agent_id="a",
            expected_version=0,
            appends=(ViewEntry(entry_id=message.message_id, seq=0, message=message),),
            next_seq=1,
        )
        barrier.wait(timeout=30)
        try:
            outcomes.append(store.commit(changeset))
        except ConcurrencyConflict as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=create, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return outcomes


def test_racing_first_commits_one_wins_one_conflicts(sql_store: SQLStore) -> None:
    for round_ in range(5):
        outcomes = _race_first_commits(sql_store, f"first-{round_}")
        assert sorted(type(o).__name__ for o in outcomes) == ["ConcurrencyConflict", "int"]
        snap = sql_store.load(f"first-{round_}", "a")
        assert snap is not None
        assert snap.state.version == 1
        assert len(snap.entries) == 1


def _row_counts(store: SQLStore) -> dict[str, int]:
    """Rows of every table a session owns (an app's and a user's state belong to no session)."""
    with store.engine.connect() as conn:
        return {
            name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for name, table in Base.metadata.tables.items()
            if name != "cl_scope_state"
        }


def test_delete_session_removes_every_row_and_only_that_session(sql_store: SQLStore) -> None:
    for session in ("gone", "kept"):
        # An expired conversation leaves an expiry row under its ids, forgotten when its session is deleted.
        for agent in ("a", "b"):
            Conversation(sql_store, session, agent).append(Message.user("soon expired"))
        assert len(sql_store.expire_session(session, idle_before=utcnow() + timedelta(seconds=1), reason="t")) == 2
        for agent in ("a", "b"):
            conversation = Conversation(sql_store, session, agent)
            conversation.append(*[Message.user(f"{session}-{agent}-{i}") for i in range(6)])
            conversation.pin(conversation.view.ids[5])
            conversation.apply_plan(
                lambda v: ReductionPlan(
                    strategy="summarizing",
                    summary=SummaryDraft(content="S", summarizer="t", replaces=tuple(v.ids[:2])),
                ),
                trigger="proactive",
            )
            conversation.apply_plan(
                lambda v: ReductionPlan(
                    strategy="summarizing",
                    summary=SummaryDraft(content="S2", summarizer="t", replaces=tuple(v.ids[:2])),
                ),
                trigger="reactive",
            )
            conversation.apply_plan(
                lambda v: ReductionPlan(
                    strategy="w",
                    revisions=({"message_id": v.ids[-1], "content": [{"text": "cut"}]},),
                ),
                trigger="reactive",
            )
            # An erased entry leaves a tombstone row, deleted with its session too.
            erase(sql_store, session, conversation.view.ids[-2], reason="t", agent_id=agent)
            # A lineage link is kept under its ancestor, and goes with it.
            link = LineageLink(
                session_id=session, agent_id=agent, child_session_id=f"{session}-fork", child_agent_id=agent
            )
            assert sql_store.add_lineage([link]) == 1
    before = _row_counts(sql_store)
    assert all(count > 0 for count in before.values()), before
    assert sql_store.delete_session("gone") is True
    after = _row_counts(sql_store)
    assert after == {name: count // 2 for name, count in before.items()}
    assert sql_store.agents("gone") == []
    assert sql_store.agents("kept") == ["a", "b"]
    assert len(sql_store.history("kept", "a")) == 6
