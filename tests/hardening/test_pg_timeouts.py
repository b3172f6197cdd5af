"""PostgreSQL: a statement never waits forever behind a lock held by another connection."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from contextledger import Conversation, Ledger, Message
from contextledger.errors import ConfigurationError, StoreTimeout
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.engine import parse_url


def _setting(store: SQLStore, name: str) -> str:
    with store.engine.connect() as conn:
        return str(conn.execute(text(f"SHOW {name}")).scalar_one())


def test_default_timeouts_are_set_and_overridable(postgres_ledger_url: str) -> None:
    with Ledger.connect(postgres_ledger_url) as ledger:
        assert isinstance(ledger.store, SQLStore)
        assert _setting(ledger.store, "lock_timeout") == "5s"
        assert _setting(ledger.store, "statement_timeout") == "30s"
    with Ledger.connect(postgres_ledger_url, lock_timeout=0.25, statement_timeout=None) as ledger:
        assert isinstance(ledger.store, SQLStore)
        assert _setting(ledger.store, "lock_timeout") == "250ms"
        assert _setting(ledger.store, "statement_timeout") == "0"
    options = {"options": "-c lock_timeout=1500"}
    with Ledger.connect(postgres_ledger_url, connect_args=options) as ledger:
        assert isinstance(ledger.store, SQLStore)
        assert _setting(ledger.store, "lock_timeout") == "1500ms"
        assert _setting(ledger.store, "statement_timeout") == "30s"
    with pytest.raises(ConfigurationError, match="lock_timeout"):
        Ledger.connect(postgres_ledger_url, lock_timeout=-1)


def test_an_append_behind_a_held_lock_raises_store_timeout(postgres_ledger_url: str) -> None:
    with Ledger.connect(postgres_ledger_url, lock_timeout=0.3) as ledger:
        conv = Conversation(ledger.store, "s")
        conv.append(Message.user("first"))
        other = create_engine(parse_url(postgres_ledger_url))
        try:
            with other.connect() as holder:
                transaction = holder.begin()
                # Another process holds the conversation's row lock (as a long commit would).
                holder.execute(text("SELECT id FROM cl_conversations WHERE session_id = 's' FOR UPDATE"))
                with pytest.raises(StoreTimeout, match="timed out"):
                    conv.append(Message.user("second"))
                transaction.rollback()
        finally:
            other.dispose()
        # Nothing was applied, and the same conversation goes on once the lock is gone.
        assert [m.plain_text for m in Conversation(ledger.store, "s").messages] == ["first"]
        conv.append(Message.user("second"))
        assert [m.plain_text for m in Conversation(ledger.store, "s").messages] == ["first", "second"]
