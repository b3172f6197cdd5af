"""The SQL ledger: SQLAlchemy 2 + Alembic, SQLite embedded by default, PostgreSQL on psycopg 3.

``Ledger.connect("sqlite:///agents.db")`` or ``Ledger.connect("postgresql+psycopg://…")``
open a :class:`SQLStore`. The schema functions take a URL, engine or connection:

* :func:`head` -- the revision this library needs;
* :func:`current` -- the revision a database is at (``None`` when absent);
* :func:`upgrade` / :func:`downgrade` -- migrate (history kept in
  :data:`VERSION_TABLE`, beside any application's own ``alembic_version``).

The schema functions are imported on first use (PEP 562): opening a SQLite ledger whose
schema is current, and restoring from it, imports neither SQLAlchemy nor Alembic.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from contextledger.stores.sql.reader import VERSION_TABLE
from contextledger.stores.sql.store import SQLStore

if TYPE_CHECKING:
    from contextledger.stores.sql.schema import current, downgrade, head, upgrade, upgrade_command, verify

__all__ = [
    "VERSION_TABLE",
    "SQLStore",
    "current",
    "downgrade",
    "head",
    "upgrade",
    "upgrade_command",
    "verify",
]

_SCHEMA = frozenset({"current", "downgrade", "head", "upgrade", "upgrade_command", "verify"})


def __getattr__(name: str) -> Any:
    if name not in _SCHEMA:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("contextledger.stores.sql.schema"), name)
    globals()[name] = value
    return value
