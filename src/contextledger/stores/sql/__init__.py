"""The SQL ledger: SQLAlchemy 2 + Alembic, SQLite embedded by default, PostgreSQL on psycopg 3.

``Ledger.connect("sqlite:///agents.db")`` or ``Ledger.connect("postgresql+psycopg://…")``
open a :class:`SQLStore`. The schema functions take a URL, engine or connection:

* :func:`head` -- the revision this library needs;
* :func:`current` -- the revision a database is at (``None`` when absent);
* :func:`upgrade` / :func:`downgrade` -- migrate (history kept in
  :data:`VERSION_TABLE`, beside any application's own ``alembic_version``).
"""

from contextledger.stores.sql.schema import VERSION_TABLE, current, downgrade, head, upgrade, upgrade_command, verify
from contextledger.stores.sql.store import SQLStore

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
