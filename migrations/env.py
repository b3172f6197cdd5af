"""Alembic environment of the contextledger schema.

Run through ``contextledger.stores.sql.schema`` (``upgrade``/``downgrade``/``current``)
or ``contextledger db upgrade``; those hand in a connection. The history lives in its
own version table so the ledger can share a database with an application's Alembic.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, pool

from contextledger.stores.sql.engine import build_engine, parse_url
from contextledger.stores.sql.models import Base
from contextledger.stores.sql.schema import VERSION_TABLE, include_object

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        include_object=include_object,
        compare_type=True,
        **kwargs,
    )


def run_offline() -> None:
    url = config.get_main_option("sqlalchemy.url")
    _configure(url=url, literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    # SQLite cannot ALTER most things in place; batch mode recreates the table.
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection given and no sqlalchemy.url configured")
    engine = build_engine(parse_url(url), poolclass=pool.NullPool)
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
