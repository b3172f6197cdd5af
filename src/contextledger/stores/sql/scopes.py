"""The key/value state of apps and their users on SQL: one row per key in ``cl_scope_state``.

A merge is one upsert statement (run for every key of the delta), so writers of
different keys never wait for each other and a key's last writer wins, as on the other
stores. The app's own state is stored under an empty ``user_id`` (user ids are never
empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from contextledger.errors import ConfigurationError
from contextledger.stores.sql.models import ID_LENGTH, ScopeStateRow

__all__ = ["delete_scope", "merge_scope"]


def merge_scope(conn: Connection, app: str, user: str | None, delta: Mapping[str, Any], now: datetime) -> None:
    """Upsert every key of ``delta`` into the state of ``app`` (or of its ``user``).

    Raises:
        ConfigurationError: ``app``, ``user`` or a key is longer than its column.
    """
    for what, value in (("app", app), ("user", user or ""), *(("state key", key) for key in delta)):
        if len(value) > ID_LENGTH:
            raise ConfigurationError(
                f"{what} is {len(value)} characters long; the SQL ledger stores at most {ID_LENGTH}"
            )
    if not delta:
        return
    upsert = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(ScopeStateRow)
    stmt = upsert.on_conflict_do_update(
        index_elements=["app", "user_id", "key"],
        set_={"value": upsert.excluded.value, "updated_at": upsert.excluded.updated_at},
    )
    conn.execute(
        stmt,
        [
            {"app": app, "user_id": user or "", "key": key, "value": value, "updated_at": now}
            for key, value in delta.items()
        ],
    )


def delete_scope(conn: Connection, app: str, user: str | None) -> bool:
    """Delete the state of ``app`` (or of its ``user``); whether any row was there."""
    result = conn.execute(delete(ScopeStateRow).where(ScopeStateRow.app == app, ScopeStateRow.user_id == (user or "")))
    return bool(result.rowcount)
