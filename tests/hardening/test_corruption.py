"""Damaged stored values are a typed CorruptRecord naming the table or key and the id.

Each test damages one value behind the library's back (an SQL UPDATE, a Redis HSET),
then checks that every read of that conversation raises ``CorruptRecord`` and nothing
else, that a canary conversation beside it still reads exactly, and that the CLI prints
one line with exit code 7.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from contextledger import Conversation, Ledger, Message, SlidingWindowConversationManager
from contextledger.cli import ExitCode, app
from contextledger.errors import CorruptRecord, StoreError
from contextledger.stores.capabilities import CompleteStore, complete
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys
from contextledger.stores.sql import SQLStore

Damage = Callable[[CompleteStore, Conversation], str]
"""Damages one stored value of the conversation; returns the id the error must name."""


def _seed(store: CompleteStore, session_id: str) -> Conversation:
    conv = Conversation(store, session_id, manager=SlidingWindowConversationManager(window_size=4))
    msgs = [Message.user(f"{session_id} q{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)]
    conv.append(*msgs)
    conv.pin(msgs[2].message_id)
    conv.reduce("manual")  # evicts: a reduction row, evicted entries
    conv.set_agent_state({"k": "v"})
    return conv


def _sql(store: CompleteStore, statement: str, **params: Any) -> None:
    assert isinstance(store, SQLStore)
    with store.engine.begin() as conn:
        result = conn.execute(text(statement), params)
        assert result.rowcount >= 1


def _conv_id(session_id: str) -> str:
    return f"(SELECT id FROM cl_conversations WHERE session_id = '{session_id}')"


def _sql_damage(column: str, table: str, value: str) -> Damage:
    def damage(store: CompleteStore, conv: Conversation) -> str:
        if table == "cl_entries":
            target = conv.view[-1].entry_id
            _sql(store, f"UPDATE cl_entries SET {column} = :v WHERE message_id = :id", v=value, id=target)
            return target
        if table == "cl_conversations":
            _sql(store, f"UPDATE cl_conversations SET {column} = :v WHERE session_id = :s", v=value, s=conv.session_id)
            return f"{conv.session_id}/{conv.agent_id}"
        if table == "cl_reductions":
            (reduction,) = store.reductions(conv.session_id)
            stmt = f"UPDATE cl_reductions SET {column} = :v WHERE reduction_id = :id"
            _sql(store, stmt, v=value, id=reduction.reduction_id)
            return reduction.reduction_id
        raise AssertionError(table)

    return damage


def _redis(store: CompleteStore) -> tuple[Any, ConversationKeys]:
    assert isinstance(store, RedisStore)
    return store._data.client, ConversationKeys.of(store.key_prefix, "victim", "default")


def _redis_content(store: CompleteStore, conv: Conversation) -> str:
    client, keys = _redis(store)
    target = conv.view[-1].entry_id
    client.hset(keys.content, target, b"[{not json")
    return target


def _redis_bytes_tag(store: CompleteStore, conv: Conversation) -> str:
    client, keys = _redis(store)
    target = conv.view[-1].entry_id
    damaged = b'[{"image":{"format":"png","source":{"bytes":{"__contextledger_bytes__":"!!"}}}}]'
    client.hset(keys.content, target, damaged)
    return target


def _redis_state(field: str, value: bytes) -> Damage:
    def damage(store: CompleteStore, conv: Conversation) -> str:
        client, keys = _redis(store)
        client.hset(keys.state, field, value)
        return f"{conv.session_id}/{conv.agent_id}"

    return damage


def _redis_reduction(store: CompleteStore, conv: Conversation) -> str:
    client, keys = _redis(store)
    (reduction,) = store.reductions(conv.session_id)
    client.lset(keys.red, 0, b'{"reduction_id":"' + reduction.reduction_id.encode() + b'","trigger":42}')
    return reduction.reduction_id


SQL_DAMAGE: dict[str, Damage] = {
    "content-shape": _sql_damage("content", "cl_entries", '{"not": "a list"}'),
    "content-bytes-tag": _sql_damage(
        "content", "cl_entries", '[{"image": {"source": {"bytes": {"__contextledger_bytes__": "!!"}}}}]'
    ),
    "metadata-shape": _sql_damage("metadata", "cl_entries", "[1, 2]"),
    "manager-state": _sql_damage("manager_state", "cl_conversations", "[1, 2]"),
    "agent-state": _sql_damage("agent_state", "cl_conversations", '"text"'),
    "reduction-evicted": _sql_damage("evicted", "cl_reductions", '{"x": 1}'),
}
SQLITE_ONLY_DAMAGE: dict[str, Damage] = {
    # PostgreSQL's json type refuses invalid JSON on write; SQLite stores any text.
    "content-invalid-json": _sql_damage("content", "cl_entries", "[{not json"),
    "metadata-invalid-json": _sql_damage("metadata", "cl_entries", "{"),
    "manager-state-invalid-json": _sql_damage("manager_state", "cl_conversations", "{"),
}
REDIS_DAMAGE: dict[str, Damage] = {
    "content-invalid-json": _redis_content,
    "content-bytes-tag": _redis_bytes_tag,
    "version": _redis_state("version", b"not a number"),
    "manager-state": _redis_state("manager_state", b"{"),
    "created-at": _redis_state("created_at", b"yesterday"),
    "reduction": _redis_reduction,
}


def _cases(store: CompleteStore) -> dict[str, Damage]:
    if isinstance(store, SQLStore):
        extra = SQLITE_ONLY_DAMAGE if store.engine.dialect.name == "sqlite" else {}
        return {**SQL_DAMAGE, **extra}
    if isinstance(store, RedisStore):
        return REDIS_DAMAGE
    pytest.skip("the memory store keeps records as objects: nothing to damage")


def _reads(store: CompleteStore, conv: Conversation) -> list[Callable[[], object]]:
    sid = conv.session_id
    return [
        lambda: Conversation(store, sid),
        lambda: store.load(sid, "default"),
        lambda: store.history(sid, "default"),
        lambda: store.evictions(sid),
        lambda: store.reductions(sid),
        lambda: store.summaries(sid),
        lambda: store.revisions(sid, "default"),
        lambda: conv.append(Message.user("after the damage")),
    ]


def test_damaged_values_are_corrupt_records_and_stay_contained(store: CompleteStore) -> None:
    for name, damage in _cases(store).items():
        canary = _seed(store, "canary")
        before = [e.message for e in Conversation(store, "canary").view]
        victim = _seed(store, "victim")
        record_id = damage(store, victim)
        errors: list[CorruptRecord] = []
        for read in _reads(store, victim):
            try:
                read()
            except CorruptRecord as exc:
                errors.append(exc)
            except StoreError as exc:  # pragma: no cover - the failure this test exists for
                pytest.fail(f"{name}: untyped store error {exc!r}")
        assert errors, f"{name}: no read noticed the damage"
        for error in errors:
            assert error.record_id == record_id, (name, str(error))
            assert error.where, (name, str(error))
            assert record_id in str(error)
        # The canary, and the ledger's listing, are untouched.
        assert [e.message for e in Conversation(store, "canary").view] == before
        assert [e.message for e in canary.view] == before
        listed = {s.session_id: s for s in store.sessions()}
        assert set(listed) == {"canary", "victim"}
        assert listed["canary"].damaged == ()
        store.delete_session("victim")
        store.delete_session("canary")


def test_a_damaged_state_is_listed_and_marked(store: CompleteStore) -> None:
    if not isinstance(store, RedisStore):
        pytest.skip("SQL sessions() reads no JSON; the memory store cannot be damaged")
    _seed(store, "canary")
    victim = _seed(store, "victim")
    _redis_state("updated_at", b"garbage")(store, victim)
    listed = {s.session_id: s for s in store.sessions()}
    assert listed["victim"].damaged == ("default",)
    assert listed["canary"].damaged == ()
    assert Ledger(store).sessions()[0].session_id in {"canary", "victim"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_cli_prints_one_line_and_exit_code_7(
    backend: str, request: pytest.FixtureRequest, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        url = request.getfixturevalue("postgres_ledger_url")
    monkeypatch.delenv("CONTEXTLEDGER_URL", raising=False)
    with Ledger.connect(url) as ledger:
        _seed(complete(ledger.store, "tests"), "canary")
        victim = _seed(complete(ledger.store, "tests"), "victim")
        record_id = SQL_DAMAGE["content-bytes-tag"](complete(ledger.store, "tests"), victim)
    runner = CliRunner()
    for command in (["show", "victim"], ["history", "victim"], ["export", "victim"]):
        result = runner.invoke(app, [*command, "--url", url], catch_exceptions=False)
        assert result.exit_code == ExitCode.CORRUPT, result.output
        assert int(ExitCode.CORRUPT) == 7
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: corrupt record (cl_entries")
        assert record_id in lines[0]
        assert "Traceback" not in result.output
    ok = runner.invoke(app, ["show", "canary", "--url", url], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    listing = runner.invoke(app, ["sessions", "--url", url], catch_exceptions=False)
    assert listing.exit_code == 0
    assert "canary" in listing.stdout
    assert "victim" in listing.stdout
