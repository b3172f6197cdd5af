"""0008 keeps the commit log of SQLite in its primary key's b-tree: rows, exactly-once and pages.

Commits are logged, the schema is taken down to 0007 (a rowid table beside its key's
index, the same rows) and up again: every logged changeset must still be found (a
commit sent again answers its version instead of applying twice), and a commit writes
one page of the log to the WAL, where 0007's layout wrote two.
"""

from __future__ import annotations

import sqlite3
import struct
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import make_url

from contextledger import Message
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.stores.sql import SQLStore, current, downgrade, head, upgrade


def _path(url: str) -> str:
    database = make_url(url).database
    assert database
    return database


def _log_sql(url: str) -> str:
    with sqlite3.connect(_path(url)) as conn:
        (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'cl_changesets'").fetchone()
    return str(sql)


def _log_rows(url: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(_path(url)) as conn:
        return conn.execute("SELECT * FROM cl_changesets ORDER BY conversation_id, version").fetchall()


def _log_pages_of_one_append(url: str, conversation: Conversation) -> Counter[str]:
    """Which objects' pages one append writes to the WAL (emptied first by a checkpoint)."""
    path = _path(url)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conversation.append(Message.user("one more"), Message.assistant("and its answer"))
    data = Path(f"{path}-wal").read_bytes()
    size = struct.unpack(">I", data[8:12])[0]
    pages = [struct.unpack(">I", data[at : at + 4])[0] for at in range(32, len(data) - size, 24 + size)]
    with sqlite3.connect(path) as conn:
        owner = dict(conn.execute("SELECT pageno, name FROM dbstat"))
    return Counter(owner.get(page, "?") for page in pages)


def _append_turns(store: SQLStore, conversation: Conversation, turns: int) -> list[Changeset]:
    """Append ``turns`` turns; the changesets committed, in order."""
    sent: list[Changeset] = []
    commit = store.commit

    def recording(cs: Changeset) -> int:
        sent.append(cs)
        return commit(cs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "commit", recording)
        for n in range(turns):
            conversation.append(Message.user(f"question {n}"), Message.assistant(f"answer {n}"))
    return sent


def test_the_log_leaves_its_rowid_and_keeps_its_rows(sqlite_url: str) -> None:
    store = SQLStore.from_url(sqlite_url)
    try:
        sent = _append_turns(store, Conversation(store, "s", "a"), 5)
        _append_turns(store, Conversation(store, "s", "b"), 2)
    finally:
        store.close()
    rows = _log_rows(sqlite_url)
    assert len(rows) == 7

    downgrade(sqlite_url, "0007")  # 0007's layout: a rowid table and its key's index, the same rows
    assert "WITHOUT ROWID" not in _log_sql(sqlite_url)
    assert _log_rows(sqlite_url) == rows

    upgrade(sqlite_url)
    assert current(sqlite_url) == head()
    assert _log_sql(sqlite_url).rstrip().endswith("WITHOUT ROWID")
    assert _log_rows(sqlite_url) == rows
    store = SQLStore.from_url(sqlite_url, auto_upgrade=False)
    try:
        # A changeset logged before the upgrade, sent again, answers its version (exactly once).
        assert store.commit(sent[-1]) == sent[-1].new_version
        conversation = Conversation(store, "s", "a")
        assert conversation.version == 5
        pages = _log_pages_of_one_append(sqlite_url, conversation)
    finally:
        store.close()
    assert pages["cl_changesets"] == 1, pages
    assert not any(name.startswith("sqlite_autoindex_cl_changesets") for name in pages), pages
    assert len(_log_rows(sqlite_url)) == 8


def test_a_new_ledger_writes_one_page_of_its_log_per_commit(sqlite_url: str) -> None:
    store = SQLStore.from_url(sqlite_url)
    try:
        conversation = Conversation(store, "s", "a")
        _append_turns(store, conversation, 3)
        pages = _log_pages_of_one_append(sqlite_url, conversation)
    finally:
        store.close()
    assert pages["cl_changesets"] == 1, pages
    assert pages["cl_conversations"] == 1, pages
    # What an append writes, and nothing else (a new index on this path shows up here);
    # page 1 (sqlite_schema) when the file grows.
    assert set(pages) >= {"cl_changesets", "cl_entries", "cl_conversations"}
    assert set(pages) <= {
        "cl_changesets",
        "cl_entries",
        "cl_conversations",
        "sqlite_autoindex_cl_entries_1",
        "ix_cl_entries_conversation_id_status_seq",
        "sqlite_schema",
    }, pages
