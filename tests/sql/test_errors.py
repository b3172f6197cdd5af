"""Driver errors become the library's errors at the store boundary; bad input loses nothing."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from contextledger import Changeset, Ledger, Message, ReductionPlan, ViewEntry
from contextledger.conversation.conversation import Conversation
from contextledger.errors import (
    ConfigurationError,
    EntryNotFound,
    InvalidLedgerURL,
    InvalidMessage,
    StoreUnavailable,
)
from contextledger.model.records import Reduction, SummaryEntry
from contextledger.stores.sql import SQLStore
from tests.plugins import in_ci
from tests.plugins.postgres_server import find_binaries, start_postgres


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://u@127.0.0.1/db",
        "postgresql+psycopg2://u@127.0.0.1/db",
        "sqlite+aiosqlite:///x.db",
        "postgresql://u:pw@127.0.0.1:notaport/db",
    ],
)
def test_bad_urls_are_invalid_ledger_urls(url: str) -> None:
    with pytest.raises(InvalidLedgerURL) as info:
        Ledger.connect(url)
    assert ":pw@" not in str(info.value)


def test_missing_postgres_driver_is_an_invalid_ledger_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(InvalidLedgerURL, match=r"pip install 'contextledger\[postgres\]'") as info:
        Ledger.connect(f"postgresql://ledger:topsecret@127.0.0.1:{_closed_port()}/ledger")
    assert "topsecret" not in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)


def test_unreachable_server_is_store_unavailable_naming_the_host() -> None:
    port = _closed_port()
    url = f"postgresql://ledger:topsecret@127.0.0.1:{port}/ledger"
    with pytest.raises(StoreUnavailable) as info:
        Ledger.connect(url, auto_upgrade=True, connect_timeout=5)
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message
    assert "topsecret" not in message
    assert len(message.splitlines()) == 1
    assert isinstance(info.value.__cause__, SQLAlchemyError)
    # The same without auto_upgrade (the schema check is what connects first).
    with pytest.raises(StoreUnavailable):
        SQLStore.from_url(url, connect_timeout=5)


def test_unopenable_sqlite_file_is_store_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "ledger.db"
    with pytest.raises(StoreUnavailable) as info:
        Ledger.connect(f"sqlite:///{missing}")
    assert str(missing) in str(info.value)


@pytest.mark.skipif(
    find_binaries() is None and not in_ci(), reason="needs local PostgreSQL binaries to stop a server mid-use"
)
def test_server_going_away_mid_use_is_store_unavailable() -> None:
    with start_postgres() as server:
        store = SQLStore.from_url(server.url, auto_upgrade=True)
        conversation = Conversation(store, "s", "a")
        conversation.append(Message.user("hi"))
        server.stop()
        with pytest.raises(StoreUnavailable) as info:
            store.load("s", "a")
        assert f"127.0.0.1:{server.port}" in str(info.value)
        store.close()


def test_password_is_masked_in_store_url(postgres_ledger_url: str) -> None:
    parsed = make_url(postgres_ledger_url)
    password = parsed.password or "s3cret-pw"  # the throwaway server trusts loopback
    url = parsed.set(password=password).render_as_string(hide_password=False)
    with Ledger.connect(url) as ledger:
        assert password not in ledger.url
        assert "***" in ledger.url
        assert password not in repr(ledger.store)


def test_negative_paging_is_rejected(sql_store: SQLStore) -> None:
    with pytest.raises(ConfigurationError):
        sql_store.sessions(limit=-1)


def _snapshot(store: SQLStore) -> object:
    snap = store.load("s", "a")
    assert snap is not None
    return (snap.state.version, snap.state.model_call_count, snap.entries, store.history("s", "a"))


def _reduction(**kw: object) -> Reduction:
    fields: dict[str, object] = {
        "session_id": "s",
        "agent_id": "a",
        "trigger": "manual",
        "strategy": "t",
        "messages_before": 0,
        "messages_after": 0,
        "tokens_before": 0,
        "tokens_after": 0,
    }
    fields.update(kw)
    return Reduction.model_validate(fields)


def test_bad_changesets_lose_nothing(sql_store: SQLStore) -> None:
    conversation = Conversation(sql_store, "s", "a")
    msgs = [Message.user(f"m{i}") for i in range(4)]
    conversation.append(*msgs)
    conversation.apply_plan(lambda v: _plan_evict(v.ids[0]), trigger="manual")
    before = _snapshot(sql_store)
    new = ViewEntry(entry_id="new", seq=4, message=Message.user("new", message_id="new"), tokens=1)
    v = conversation.version
    bad = [
        # pin an evicted message, with an append and state riding along
        Changeset(
            session_id="s",
            agent_id="a",
            expected_version=v,
            appends=(new,),
            pins={msgs[0].message_id: True},
            next_seq=5,
            model_call_count=9,
        ),
        # revise an unknown message
        Changeset(
            session_id="s",
            agent_id="a",
            expected_version=v,
            appends=(new,),
            revisions=({"message_id": "nope", "content": [{"text": "x"}]},),
            reduction=_reduction(),
        ),
        # a summary replacing an evicted entry
        Changeset(
            session_id="s",
            agent_id="a",
            expected_version=v,
            appends=(new,),
            reduction=_reduction(),
            summary=SummaryEntry(
                session_id="s",
                agent_id="a",
                seq=0,
                content="S",
                summarizer="t",
                reduction_id="r",
                replaces=(msgs[0].message_id, msgs[1].message_id),
            ),
        ),
    ]
    for changeset in bad:
        with pytest.raises(EntryNotFound):
            sql_store.commit(changeset)
        assert _snapshot(sql_store) == before
    assert sql_store.summaries("s") == []
    assert len(sql_store.reductions("s")) == 1


def _plan_evict(entry_id: str) -> ReductionPlan:
    return ReductionPlan(strategy="w", evict=(entry_id,))


def test_overlong_ids_are_rejected_before_the_database(sql_store: SQLStore) -> None:
    conversation = Conversation(sql_store, "s", "a")
    conversation.append(Message.user("ok"))
    before = _snapshot(sql_store)
    with pytest.raises(InvalidMessage):
        conversation.append(Message.user("long", message_id="x" * 300))
    with pytest.raises(ConfigurationError):
        Conversation(sql_store, "s" * 300, "a").append(Message.user("x"))
    assert _snapshot(sql_store) == before
    assert [s.session_id for s in sql_store.sessions()] == ["s"]


def test_postgres_stores_nul_in_text_columns(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("a"), Message.user("b"))
    from contextledger import ReductionPlan, SummaryDraft

    conversation.apply_plan(
        lambda v: ReductionPlan(
            strategy="summarizing",
            summary=SummaryDraft(content="nul \x00 text", summarizer="t", replaces=(v.ids[0],)),
        ),
        trigger="manual",
    )
    assert [s.content for s in postgres_store.summaries("s")] == ["nul \x00 text"]
    # Message content keeps NUL characters: it is stored as JSON text, escaped.
    conversation.refresh()
    conversation.append(Message.user("nul \x00 inside"))
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert snap.entries[-1].message.plain_text == "nul \x00 inside"


@pytest.mark.parametrize("value", ["no", 0, 1, "false"])
def test_auto_upgrade_must_be_a_bool(tmp_path: Path, value: object) -> None:
    path = tmp_path / "x.db"
    with pytest.raises(ConfigurationError, match="auto_upgrade"):
        SQLStore.from_url(f"sqlite:///{path}", auto_upgrade=value)  # type: ignore[arg-type]
    assert not path.exists()
