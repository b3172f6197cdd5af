"""Encryption at rest, seen from the disk: no plaintext in the SQLite files, the Redis keys or PostgreSQL's tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from contextledger import Ledger, Message
from contextledger.encryption import Keyring, new_key
from contextledger.errors import ConfigurationError, EncryptionKeyMissing
from contextledger.history.rotation import rotate
from contextledger.stores.capabilities import CompleteStore, complete
from contextledger.stores.encrypted import EncryptedStore
from contextledger.stores.sql import SQLStore
from contextledger.testing.encryption import SECRET, encrypted, encrypted_conversation, stored_tokens
from tests.cli.conftest import Invoke
from tests.lifecycle.scan import files, redis_dump


def test_sqlite_files_hold_no_plaintext_and_no_old_token_after_rotation_and_erase(tmp_path: Path) -> None:
    k1, k2 = new_key(), new_key()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger.connect(url, encryption=Keyring([("k1", k1)])) as ledger:
        assert isinstance(ledger.store, EncryptedStore)
        ids = encrypted_conversation(ledger.store)
        assert SECRET in ledger.history("s", "a")[0].message.model_dump_json()
    assert SECRET.encode() not in files(tmp_path)
    with Ledger.connect(url) as plain, pytest.raises(EncryptionKeyMissing, match="encrypted"):
        plain.conversation("s", "a")  # no keys: a typed error, never the tokens as content
    with Ledger.connect(url, encryption=Keyring([("k2", k2), ("k1", k1)])) as ledger:
        before = stored_tokens(complete(ledger.store, "tests"))
        rotate(ledger.store)
        after = stored_tokens(complete(ledger.store, "tests"))
        on_disk = files(tmp_path)
        assert not any(t.encode() in on_disk for t in before)  # re-sealed, and the old bytes gone
        erasure = ledger.erase("s", ids["first"], reason="asked")
        assert erasure.pending is None
    with Ledger.connect(url, encryption=Keyring([("k2", k2)])) as ledger:
        gone = set(after) - set(stored_tokens(complete(ledger.store, "tests")))
    on_disk = files(tmp_path)
    assert gone
    assert not any(t.encode() in on_disk for t in gone)


def test_redis_keys_hold_no_plaintext(redis_store: CompleteStore) -> None:
    encrypted_conversation(encrypted(redis_store))
    dump = redis_dump(redis_store)
    assert b"clenc1.k1." in dump
    assert SECRET.encode() not in dump
    with pytest.raises(EncryptionKeyMissing):
        redis_store.load("s", "a")


def test_redis_cluster_keys_hold_no_plaintext(redis_cluster_store: CompleteStore) -> None:
    encrypted_conversation(encrypted(redis_cluster_store))
    dump = redis_dump(redis_cluster_store)
    assert b"clenc1.k1." in dump
    assert SECRET.encode() not in dump


def test_postgres_tables_hold_no_plaintext(postgres_store: CompleteStore) -> None:
    assert isinstance(postgres_store, SQLStore)
    encrypted_conversation(encrypted(postgres_store))
    with postgres_store.engine.connect() as conn:
        tables = conn.execute(text("SELECT tablename FROM pg_tables WHERE tablename LIKE 'cl_%'")).scalars().all()
        dump = "\n".join(
            row for table in tables for row in conn.execute(text(f"SELECT CAST(t AS text) FROM {table} t")).scalars()
        )
    assert "clenc1.k1." in dump
    assert SECRET not in dump
    with pytest.raises(EncryptionKeyMissing):
        postgres_store.history("s", "a")


def test_the_keyring_checks_its_keys_and_never_shows_them() -> None:
    key = new_key()
    ring = Keyring.parse(f"k2:{key}, k1:{new_key()}")
    assert ring.ids == ("k2", "k1")
    assert key not in repr(ring)
    for bad in ("", "nokey", "k1:short", f"bad id:{key}", f"k1:{key},k1:{key}"):
        with pytest.raises(ConfigurationError) as raised:
            Keyring.parse(bad)
        assert key not in str(raised.value)


def test_cli_rotation_with_keys_from_the_environment(invoke: Invoke, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    made = invoke("encryption", "new-key", "k1")
    assert made.exit_code == 0, made.output
    k1 = made.stdout.strip()
    k2 = invoke("encryption", "new-key", "k2").stdout.strip()
    with Ledger.connect(url, encryption=Keyring.parse(k1)) as ledger:
        ledger.conversation("s").append(Message.user(SECRET), Message.assistant("kept"))
    shown = invoke("history", "s", "--url", url, "--no-pager", env={"CONTEXTLEDGER_ENCRYPTION_KEYS": k1})
    assert shown.exit_code == 0, shown.output
    assert SECRET in shown.stdout
    refused = invoke("history", "s", "--url", url, "--no-pager", env={"CONTEXTLEDGER_ENCRYPTION_KEYS": ""})
    assert refused.exit_code != 0
    assert SECRET not in refused.output
    assert "clenc1" not in refused.output
    both = {"CONTEXTLEDGER_ENCRYPTION_KEYS": f"{k2},{k1}"}
    status = invoke("encryption", "status", "--url", url, env=both)
    assert "k1: 2" in status.stdout
    done = invoke("encryption", "rotate", "--url", url, "--batch-size", "1", "--no-progress", env=both)
    assert done.exit_code == 0, done.output
    assert "re-sealed 2 values of 1 conversations under key k2" in done.stdout
    again = invoke("encryption", "rotate", "--url", url, "--no-progress", env=both)
    assert "re-sealed 0 values" in again.stdout
    assert "k2: 2" in invoke("encryption", "status", "--url", url, env={"CONTEXTLEDGER_ENCRYPTION_KEYS": k2}).stdout
    new_only = invoke("history", "s", "--url", url, "--no-pager", env={"CONTEXTLEDGER_ENCRYPTION_KEYS": k2})
    assert SECRET in new_only.stdout


def test_encryption_takes_a_key_provider_or_a_callable_and_refuses_anything_else(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ring = Keyring([("k1", new_key())])
    with Ledger.connect(url, encryption=lambda: ring) as ledger:
        ledger.conversation("s").append(Message.user(SECRET))
    with Ledger.connect(url, encryption=ring) as ledger:
        assert ledger.history("s")[0].message.plain_text == SECRET
    with pytest.raises(EncryptionKeyMissing):
        Ledger.connect(url, encryption=lambda: None)
    with pytest.raises(ConfigurationError):
        Ledger.connect(url, encryption="k1:not-a-keyring")


def test_the_async_api_takes_the_keys(tmp_path: Path) -> None:
    import asyncio

    from contextledger.aio import AsyncLedger

    ring = Keyring([("k1", new_key())])
    url = f"sqlite:///{tmp_path / 'ledger.db'}"

    async def main() -> None:
        async with await AsyncLedger.connect(url, encryption=ring) as ledger:
            chat = await ledger.conversation("s")
            await chat.append(Message.user(SECRET))
            assert (await ledger.history("s"))[0].message.plain_text == SECRET

    asyncio.run(main())
    assert SECRET.encode() not in files(tmp_path)
    with Ledger.connect(url, encryption=ring) as ledger:
        assert ledger.history("s")[0].message.plain_text == SECRET
