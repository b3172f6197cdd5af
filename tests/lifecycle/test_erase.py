"""Erasure: the content leaves the store for good (files and dumps searched), a tombstone stays."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from contextledger import Ledger, Message
from contextledger.core.changeset import ContentRevision, ReductionPlan, SummaryDraft
from contextledger.errors import ConfigurationError, EntryNotFound, SessionNotFound
from contextledger.history.lifecycle import ERASED_TEXT, REDACTED_TEXT
from contextledger.model.records import ViewEntry
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.sql import SQLStore
from tests.cli.conftest import Invoke

SECRET = "card 4111-1111-1111-1111 belongs to Ada Lovelace"


def _setup(ledger: Ledger) -> tuple[Message, str]:
    """A secret message, revised once, covered by a summary that a later summary superseded."""
    chat = ledger.conversation("s")
    (secret,) = chat.append(Message.user(f"my {SECRET}"))
    chat.append(*(Message.assistant("noted") if i % 2 == 0 else Message.user(f"q{i}") for i in range(6)))
    chat.apply_plan(
        lambda _v: ReductionPlan(
            strategy="t",
            revisions=(ContentRevision(message_id=secret.message_id, content=[{"text": f"short {SECRET}"}]),),
        ),
        trigger="manual",
    )
    first = chat.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s",
            summary=SummaryDraft(content=f"user said {SECRET}", summarizer="x", replaces=(secret.message_id,)),
        ),
        trigger="manual",
    )
    assert first is not None
    assert first.summary_id is not None
    view = chat.view
    second = chat.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s",
            summary=SummaryDraft(
                content=f"again {SECRET}",
                summarizer="x",
                replaces=(first.summary_id, view[1].entry_id),
            ),
        ),
        trigger="manual",
    )
    assert second is not None
    return secret, first.summary_id


def _everything(ledger: Ledger) -> str:
    """Every text the ledger holds for session ``s`` (through its queries)."""
    parts = [h.message.model_dump_json() for h in ledger.history("s")]
    parts += [s.model_dump_json() for s in ledger.summaries("s")]
    parts += [r.model_dump_json() for r in ledger.revisions("s")]
    parts += [e.model_dump_json() for e in ledger.evictions("s")]
    return "\n".join(parts)


def test_erase_removes_content_revisions_and_summary_texts(store: CompleteStore) -> None:
    ledger = Ledger(store)
    secret, _ = _setup(ledger)
    assert SECRET in _everything(ledger)
    version = ledger.conversation("s").version
    erasure = ledger.erase("s", secret.message_id, reason="GDPR request 42")
    tombstone = erasure.tombstone
    assert erasure.descendants == ()
    assert erasure.copies == ()
    assert SECRET not in _everything(ledger)
    (row,) = [h for h in ledger.history("s") if h.message.message_id == secret.message_id]
    assert row.message.plain_text == ERASED_TEXT
    assert ledger.revisions("s", "default", secret.message_id) == []
    assert all(s.content == REDACTED_TEXT for s in ledger.summaries("s"))  # both covered it
    assert len(tombstone.summaries) == 2
    assert [(t.entry_id, t.reason) for t in ledger.tombstones("s")] == [(secret.message_id, "GDPR request 42")]
    # Not a changeset, but a new version (a copy of the conversation open elsewhere re-reads
    # at its next commit); the view order stays and the view stays valid.
    chat = ledger.conversation("s")
    assert chat.version == version + 1
    assert chat.view[0].kind == "summary"
    assert chat.view[0].message.plain_text == REDACTED_TEXT
    chat.append(Message.user("and now?"))  # the conversation goes on


def test_erase_can_resummarize(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    secret, first = _setup(ledger)

    def summarize(entries: Sequence[ViewEntry]) -> str:
        return "summary of " + " | ".join(e.message.plain_text for e in entries)

    ledger.erase("s", secret.message_id, reason="asked", summarizer=summarize)
    texts = {s.summary_id: s.content for s in ledger.summaries("s")}
    assert texts[first] == f"summary of {ERASED_TEXT}"
    assert all(SECRET not in t for t in texts.values())
    assert any(f"summary of summary of {ERASED_TEXT}" in t for t in texts.values())


def test_erase_typed_errors(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    secret, _ = _setup(ledger)
    with pytest.raises(ConfigurationError):
        ledger.erase("s", secret.message_id, reason=" ")
    with pytest.raises(SessionNotFound):
        ledger.erase("nope", secret.message_id, reason="x")
    with pytest.raises(EntryNotFound):
        ledger.erase("s", "nope", reason="x")
    assert ledger.tombstones("s") == []


def test_erase_keeps_tool_pairs_whole(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    chat = ledger.conversation("s")
    chat.append(Message.user("go"), Message.tool_use("t1", "lookup", {"q": SECRET}), Message.tool_result("t1", SECRET))
    for entry in list(chat.view)[1:]:
        ledger.erase("s", entry.entry_id, reason="x")
    chat.refresh()
    assert chat.view.dangling_tool_uses() == []
    assert chat.view.orphan_results() == []
    assert SECRET not in _everything(ledger)


def test_sqlite_file_no_longer_holds_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        secret, _ = _setup(ledger)
        ledger.close()

    def files() -> bytes:
        return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())

    assert SECRET.encode() in files()
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        ledger.erase("s", secret.message_id, reason="x")
        assert SECRET.encode() not in files()  # the WAL was checkpointed, free pages zeroed
    assert SECRET.encode() not in files()


def test_redis_keys_no_longer_hold_the_bytes(redis_store: CompleteStore) -> None:
    ledger = Ledger(redis_store)
    secret, _ = _setup(ledger)
    client = redis_store._data.client  # type: ignore[attr-defined]

    def dump() -> bytes:
        """Every value of every key (DUMP compresses, so read each type as it is)."""
        out: list[bytes] = []
        for key in client.scan_iter(match="*"):
            kind = client.type(key)
            if kind == b"hash":
                out += [b for pair in client.hgetall(key).items() for b in pair]
            elif kind == b"list":
                out += client.lrange(key, 0, -1)
            elif kind == b"zset":
                out += client.zrange(key, 0, -1)
            elif kind == b"set":
                out += list(client.smembers(key))
            elif kind == b"string":
                out.append(client.get(key))
        return b"\n".join(out)

    assert SECRET.encode() in dump()
    ledger.erase("s", secret.message_id, reason="x")
    assert SECRET.encode() not in dump()


@pytest.mark.usefixtures("postgres_quiet")  # no other transaction on the server may hold the dead rows
def test_postgres_after_vacuum_full_holds_no_bytes(postgres_store: CompleteStore) -> None:
    assert isinstance(postgres_store, SQLStore)
    ledger = Ledger(postgres_store)
    secret, _ = _setup(ledger)
    ledger.erase("s", secret.message_id, reason="x")
    postgres_store.vacuum(full=True)
    with postgres_store.engine.connect() as conn:
        data_dir = Path(conn.execute(text("SHOW data_directory")).scalar_one())
        tables = [
            conn.execute(text(f"SELECT pg_relation_filepath('{t}')")).scalar_one()
            for t in ("cl_entries", "cl_revisions", "cl_summaries")
        ]
    for relative in tables:
        for segment in data_dir.glob(relative + "*"):
            assert SECRET.encode() not in segment.read_bytes(), segment


def test_prune_deletes_old_evicted_history_only(store: CompleteStore) -> None:
    ledger = Ledger(store)
    chat = ledger.conversation("s")
    msgs = chat.append(*(Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)))
    chat.apply_plan(
        lambda _v: ReductionPlan(
            strategy="s",
            summary=SummaryDraft(content="sum", summarizer="x", replaces=(msgs[0].message_id, msgs[1].message_id)),
        ),
        trigger="manual",
    )
    view = [e.entry_id for e in chat.view]
    assert ledger.prune(older_than=timedelta(days=1)) == []  # nothing is that old
    pruned = ledger.prune(older_than=timedelta(0))
    assert {t.entry_id for t in pruned} == {msgs[0].message_id, msgs[1].message_id}
    assert [e.entry_id for e in ledger.conversation("s").view] == view  # never the active view
    assert {h.message.message_id for h in ledger.history("s")} == {m.message_id for m in msgs[2:]}
    assert {t.reason for t in ledger.tombstones("s")} == {"prune"}
    assert ledger.prune(older_than=timedelta(0)) == []  # idempotent
    with pytest.raises(ConfigurationError):
        ledger.prune(older_than=timedelta(days=-1))


def test_cli_prune(invoke: Invoke, sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        chat = ledger.conversation("s")
        msgs = chat.append(Message.user("a"), Message.assistant("b"), Message.user("c"), Message.assistant("d"))
        red = chat.apply_plan(
            lambda _v: ReductionPlan(strategy="s", evict=(msgs[0].message_id, msgs[1].message_id)), trigger="manual"
        )
        assert red is not None
        assert red.evicted == (msgs[0].message_id, msgs[1].message_id)
    kept = invoke("prune", "--older-than", "1d", "--url", sqlite_url)
    assert kept.exit_code == 0, kept.output
    assert "pruned 0 evicted entries" in kept.stdout
    done = invoke("prune", "--older-than", "0s", "--url", sqlite_url)
    assert done.exit_code == 0, done.output
    assert "pruned 2 evicted entries in 1 session(s)" in done.stdout
    with Ledger.connect(sqlite_url) as ledger:
        assert {t.entry_id for t in ledger.tombstones("s")} == {msgs[0].message_id, msgs[1].message_id}
        assert [h.message.plain_text for h in ledger.history("s")] == ["c", "d"]
