"""Opening a SQLite ledger whose schema is current, and restoring from it, needs neither SQLAlchemy nor Alembic.

The store reads through :class:`~contextledger.stores.sql.reader.SQLiteReader` (the
standard library's driver) and builds its engine on the first write. Module presence is
asserted here; the time it saves is measured in ``benchmarks/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.errors import CorruptRecord, NotALedger, SchemaOutOfDate
from contextledger.stores.sql import SQLStore, downgrade, head
from contextledger.stores.sql.engine import mask, parse_url
from contextledger.stores.sql.reader import SCHEMA_HEAD, SQLiteReader
from contextledger.stores.urls import plain_sqlite_file, plain_sqlite_masked
from tests.soak import examples

CHILD = """
import json, sys
from contextledger import Ledger
ledger = Ledger.connect(sys.argv[1])
messages = ledger.conversation("s", "agent").messages
loaded = sorted(m for m in ("sqlalchemy", "alembic") if m in sys.modules)
ledger.close()
print(json.dumps({"texts": [m.plain_text for m in messages], "loaded": loaded}))
"""


def _ledger(url: str, count: int = 6) -> list[str]:
    texts = [f"message {i}" for i in range(count)]
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("s", "agent")
        conversation.append(*[Message.user(t) if i % 2 == 0 else Message.assistant(t) for i, t in enumerate(texts)])
    return texts


def _restored_texts(store: SQLStore) -> list[str]:
    snapshot = store.load("s", "agent")
    assert snapshot is not None
    return [e.message.plain_text for e in snapshot.entries]


def _child(code: str, *args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_schema_head_constant_is_alembics_head() -> None:
    # Adding a migration without moving SCHEMA_HEAD fails here, not in a user's process.
    assert head() == SCHEMA_HEAD


def test_a_fresh_process_restores_without_sqlalchemy_or_alembic(sqlite_url: str) -> None:
    texts = _ledger(sqlite_url)
    result = _child(CHILD, sqlite_url)
    assert result == {"texts": texts, "loaded": []}


def test_a_fresh_restore_builds_no_validator(sqlite_url: str) -> None:
    # Rows the library wrote are restored without validation, so a fresh process builds
    # no pydantic validator for any record (each is built on first use, never at import).
    texts = _ledger(sqlite_url)
    code = """
    import json, sys
    from contextledger import Ledger
    from pydantic import BaseModel
    from pydantic._internal._mock_val_ser import MockValSer

    ledger = Ledger.connect(sys.argv[1])
    messages = ledger.conversation("s", "agent").messages
    ledger.close()

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    built = sorted(
        f"{model.__module__}.{model.__qualname__}"
        for model in subclasses(BaseModel)
        if model.__module__.startswith("contextledger")
        and not isinstance(model.__dict__.get("__pydantic_validator__"), MockValSer)
    )
    print(json.dumps({"texts": [m.plain_text for m in messages], "built": built}))
    """
    assert _child(code, sqlite_url) == {"texts": texts, "built": []}


def test_the_first_write_builds_the_engine(sqlite_url: str) -> None:
    _ledger(sqlite_url)
    code = """
    import json, sys
    from contextledger import Ledger, Message
    ledger = Ledger.connect(sys.argv[1])
    conversation = ledger.conversation("s", "agent")
    before = "sqlalchemy" in sys.modules
    conversation.append(Message.user("after the restore"))
    after = "sqlalchemy" in sys.modules
    ledger.close()
    print(json.dumps({"before": before, "after": after}))
    """
    assert _child(code, sqlite_url) == {"before": False, "after": True}
    with Ledger.connect(sqlite_url) as ledger:
        assert ledger.conversation("s", "agent").messages[-1].plain_text == "after the restore"


def test_a_missing_file_is_created_and_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    store = SQLStore.from_url(url)
    try:
        assert (tmp_path / "new.db").is_file()
        assert store.schema_revision() == SCHEMA_HEAD
        assert store.reader is not None  # created just now: later restores read it directly
    finally:
        store.close()


def test_an_out_of_date_schema_takes_the_engines_path(sqlite_url: str) -> None:
    texts = _ledger(sqlite_url)
    downgrade(sqlite_url, "0003")
    assert SQLiteReader.open(plain_sqlite_file(sqlite_url) or "") is None
    with pytest.raises(SchemaOutOfDate):
        SQLStore.from_url(sqlite_url, auto_upgrade=False)
    with pytest.raises(SchemaOutOfDate):
        SQLStore.from_url(sqlite_url, read_only=True)
    store = SQLStore.from_url(sqlite_url)  # SQLite upgrades itself by default
    try:
        assert store.schema_revision() == SCHEMA_HEAD
        assert store.reader is not None
        assert _restored_texts(store) == texts
    finally:
        store.close()


def test_a_file_without_the_ledger_is_not_read_by_the_reader(sqlite_url: str) -> None:
    path = plain_sqlite_file(sqlite_url)
    assert path is not None
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    assert SQLiteReader.open(path) is None
    with pytest.raises(NotALedger):
        SQLStore.from_url(sqlite_url, read_only=True)


def test_a_file_that_is_not_a_database_is_not_read_by_the_reader(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"not a database" * 100)
    assert SQLiteReader.open(str(path)) is None


def test_opening_and_restoring_never_write_the_file(sqlite_url: str) -> None:
    _ledger(sqlite_url)
    path = Path(plain_sqlite_file(sqlite_url) or "")
    before = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    store = SQLStore.from_url(sqlite_url)
    try:
        assert store.reader is not None
        assert store.load("s", "agent") is not None
        assert store.load("missing", "agent") is None
    finally:
        store.close()
    assert (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns) == before


@pytest.mark.parametrize(
    "options",
    [{"echo": True}, {"connect_args": {}}, {"pool_pre_ping": True}, {"pool_size": 2}],
    ids=["echo", "connect_args", "pool_pre_ping", "pool_size"],
)
def test_engine_options_keep_every_read_on_the_engine(sqlite_url: str, options: dict[str, Any]) -> None:
    texts = _ledger(sqlite_url)
    store = SQLStore.from_url(sqlite_url, **options)
    try:
        assert store.reader is None
        assert _restored_texts(store) == texts
    finally:
        store.close()


def test_a_damaged_row_is_reported_by_the_reader(sqlite_url: str) -> None:
    _ledger(sqlite_url)
    path = plain_sqlite_file(sqlite_url)
    assert path is not None
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE cl_entries SET content = '{not json' WHERE seq = 2")
    conn.close()
    store = SQLStore.from_url(sqlite_url)
    try:
        assert store.reader is not None
        with pytest.raises(CorruptRecord) as caught:
            store.load("s", "agent")
        assert caught.value.where == "cl_entries"
    finally:
        store.close()


def test_a_closed_store_closes_its_reader(sqlite_url: str) -> None:
    _ledger(sqlite_url)
    store = SQLStore.from_url(sqlite_url)
    reader = store.reader
    assert reader is not None
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        reader.connection.execute("SELECT 1")


_PATHS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="?"), min_size=1, max_size=30
)


@settings(max_examples=examples(200), deadline=None)
@given(path=_PATHS, absolute=st.booleans(), driver=st.sampled_from(["sqlite", "sqlite+pysqlite", "SQLite"]))
def test_plain_sqlite_urls_parse_as_sqlalchemy_parses_them(path: str, absolute: bool, driver: str) -> None:
    url = f"{driver}:///{'/' if absolute else ''}{path}"
    database = plain_sqlite_file(url)
    parsed = parse_url(url)
    if database is None:  # in-memory or the file: URI form: left to SQLAlchemy
        assert parsed.database in (None, "", ":memory:") or (parsed.database or "").startswith("file:")
        return
    assert database == parsed.database
    assert plain_sqlite_masked(database) == mask(parsed)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///x.db?mode=ro",
        "sqlite://host/x.db",
        "postgresql://h/db",
        "memory://",
    ],
)
def test_other_urls_are_left_to_sqlalchemy(url: str) -> None:
    assert plain_sqlite_file(url) is None
