"""Erasure follows lineage: forks (of forks), copies in other ledgers, and what `show` says of them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from contextledger import Ledger, Message
from contextledger.errors import ErasurePending
from contextledger.history.lifecycle import ERASED_TEXT
from contextledger.history.transfer import dump_lines, records_from_lines
from contextledger.stores.capabilities import CompleteStore
from tests.cli.conftest import Invoke
from tests.lifecycle.scan import redis_dump

SECRET = "passport number X1234567 of Grace Hopper"


def _branching(ledger: Ledger) -> str:
    """p: a secret, then calls; c forked from p at call 1, g forked from c, e forked from p now."""
    chat = ledger.conversation("p")
    (secret,) = chat.append(Message.user(f"my {SECRET}"))
    chat.before_model_call()
    chat.append(Message.assistant("noted"))
    chat.before_model_call()
    ledger.fork("p", "c", at_call=1)
    ledger.conversation("c").append(Message.user("a branch goes on"))
    ledger.fork("c", "g")
    ledger.fork("p", "e")
    return secret.message_id


def _everywhere(ledger: Ledger, session: str) -> str:
    """Everything a session shows: history, live view, past views, export."""
    parts = [h.message.model_dump_json() for h in ledger.history(session)]
    parts += [e.message.model_dump_json() for e in ledger.conversation(session).view]
    parts += [e.message.model_dump_json() for e in ledger.view_at(session, model_call=1)]
    parts.append(dump_lines(ledger.export_records(session)))
    return "\n".join(parts)


def test_erase_reaches_every_fork_in_history_view_view_at_and_export(store: CompleteStore) -> None:
    ledger = Ledger(store)
    secret = _branching(ledger)
    for session in ("p", "c", "g", "e"):
        assert SECRET in _everywhere(ledger, session)
    erasure = ledger.erase("p", secret, reason="GDPR 7")
    assert sorted(t.session_id for t in erasure.tombstones) == ["c", "e", "g", "p"]
    assert erasure.copies == ()
    assert erasure.elsewhere == ()
    for session in ("p", "c", "g", "e"):
        assert SECRET not in _everywhere(ledger, session), session
        (row,) = [h for h in ledger.history(session) if h.message.message_id == secret]
        assert row.message.plain_text == f"{ERASED_TEXT}"
        assert [t.reason for t in ledger.tombstones(session)] == ["GDPR 7"]
    assert "a branch goes on" in _everywhere(ledger, "c")  # only the entry goes


def test_forks_lists_forks_and_the_parent_of_a_fork(store: CompleteStore) -> None:
    ledger = Ledger(store)
    _branching(ledger)
    direct = ledger.forks("p")
    assert [(f.child_session_id, f.at_call, f.depth) for f in direct] == [("c", 1, 1), ("e", None, 1)]
    every = ledger.forks("p", transitive=True)
    assert [(f.child_session_id, f.depth) for f in every] == [("c", 1), ("e", 1), ("g", 2)]
    origin = ledger.fork_origin("g")
    assert origin is not None
    assert (origin.session_id, origin.ancestors) == ("c", (("c", "default"), ("p", "default")))
    assert ledger.forks("g") == []
    ledger.delete_session("e")
    assert [f.child_session_id for f in ledger.forks("p")] == ["c"]


def test_show_lists_the_lineage(invoke: Invoke, sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        _branching(ledger)
    shown = invoke("show", "p", "--url", sqlite_url, "--no-pager")
    assert shown.exit_code == 0, shown.output
    assert "p / default has a fork: c / default (at model call 1," in shown.stdout
    assert "p / default has a fork: e / default (at its view then," in shown.stdout
    assert "p / default has a fork of a fork (depth 2): g / default" in shown.stdout
    child = invoke("show", "g", "--url", sqlite_url, "--no-pager")
    assert "g / default was forked from c / default" in child.stdout


def test_copies_are_recorded_erased_when_given_and_reported_otherwise(tmp_path: Path) -> None:
    with (
        Ledger.connect(f"sqlite:///{tmp_path / 'a.db'}") as source,
        Ledger.connect(f"sqlite:///{tmp_path / 'b.db'}") as target,
    ):
        secret = _branching(source)
        source.copy_to(target, ["p", "c", "g"])
        copies = [f for f in source.forks("p") if f.kind == "copy"]
        assert [(c.child_session_id, c.ledger) for c in copies] == [("p", target.url)]
        # the forks copied are linked in the target too: erasing there follows them
        assert [f.child_session_id for f in target.forks("p", transitive=True)] == ["c", "g"]

        alone = source.erase("p", secret, reason="without the copy")
        assert {(c.child_session_id, c.ledger) for c in alone.copies} == {
            ("p", target.url),
            ("c", target.url),
            ("g", target.url),
        }
        assert not alone.complete
        with pytest.raises(ErasurePending) as pending:
            alone.raise_if_incomplete()
        assert target.url in str(pending.value)
        assert pending.value.erasure is alone
        assert SECRET in _everywhere(target, "p")

        both = source.erase("p", secret, reason="with the copy", also=[target])
        assert both.copies == ()
        assert both.complete
        assert sorted(t.session_id for e in both.elsewhere for t in e.tombstones) == ["c", "g", "p"]
        for session in ("p", "c", "g"):
            assert SECRET not in _everywhere(target, session)


def test_a_fork_imported_before_its_parent_is_linked_by_copy(tmp_path: Path) -> None:
    with Ledger.connect("memory://") as source, Ledger.connect(f"sqlite:///{tmp_path / 'b.db'}") as target:
        secret = _branching(source)
        source.copy_to(target, ["g", "c", "p"])  # forks first
        assert {f.child_session_id for f in target.forks("p", transitive=True)} == {"c", "g"}
        erasure = target.erase("p", secret, reason="x")
        assert {t.session_id for t in erasure.descendants} == {"c", "g"}


def test_an_imported_fork_is_linked_under_its_parent(tmp_path: Path) -> None:
    with Ledger.connect("memory://") as source, Ledger.connect(f"sqlite:///{tmp_path / 'b.db'}") as target:
        secret = _branching(source)
        for session in ("p", "c"):  # parent first, as an export of each session would be imported
            for records in records_from_lines(dump_lines(source.export_records(session)).splitlines()):
                target.import_records(records)
        assert [f.child_session_id for f in target.forks("p")] == ["c"]
        target.erase("p", secret, reason="x")
        assert SECRET not in _everywhere(target, "c")


def test_sqlite_files_keep_no_byte_of_an_erased_fork(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        secret = _branching(ledger)

    def files() -> bytes:
        return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())

    assert files().count(SECRET.encode()) >= 4
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        erasure = ledger.erase("p", secret, reason="x")
        assert erasure.pending is None
        assert SECRET.encode() not in files()


def test_redis_keys_keep_no_byte_of_an_erased_fork(redis_store: CompleteStore) -> None:
    ledger = Ledger(redis_store)
    secret = _branching(ledger)
    assert redis_dump(redis_store).count(SECRET.encode()) >= 4
    erasure = ledger.erase("p", secret, reason="x")
    assert erasure.pending is None  # the test server keeps no AOF or RDB
    assert SECRET.encode() not in redis_dump(redis_store)


def test_postgres_says_the_bytes_wait_for_vacuum(postgres_store: CompleteStore) -> None:
    ledger = Ledger(postgres_store)
    secret = _branching(ledger)
    erasure = ledger.erase("p", secret, reason="x")
    assert erasure.pending is not None
    assert "VACUUM" in erasure.pending
    assert ledger.settle_erasure(vacuum=True) is None


def test_the_async_api_forks_lists_and_erases_through_lineage(tmp_path: Path) -> None:
    import asyncio

    from contextledger.aio import AsyncLedger

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'a.db'}") as ledger:
            chat = await ledger.conversation("p")
            (secret,) = await chat.append(Message.user(f"my {SECRET}"))
            await ledger.fork("p", "c")
            assert [f.child_session_id for f in await ledger.forks("p")] == ["c"]
            erasure = await ledger.erase("p", secret.message_id, reason="async")
            assert [t.session_id for t in erasure.descendants] == ["c"]
            assert erasure.complete
            assert await ledger.settle_erasure() is None
            assert await ledger.expire(idle=timedelta(days=1)) == []

    asyncio.run(main())
