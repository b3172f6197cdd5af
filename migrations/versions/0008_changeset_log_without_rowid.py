"""The commit log keyed by its primary key alone on SQLite: one page written per commit, not two.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 00:00:00

On SQLite a table with a composite primary key is stored twice: its rows by a hidden
``rowid`` and its key in an index beside them, so every commit-log row written dirtied a
page of each (two of the ten or so pages an appended turn writes to the WAL). Declared
``WITHOUT ROWID``, the rows live in their primary key's b-tree: one page. The table is
rebuilt under the same name, columns and constraints, its rows copied (one small row per
commit); nothing reads a ``rowid`` of it. PostgreSQL has no ``rowid``: nothing changes
there (the revision only moves its version on).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
CHANGESET_ID = sa.String(length=64)
TS = sa.DateTime(timezone=True)

_COLUMNS = "conversation_id, version, changeset_id, created_at"


def _rebuild(*, with_rowid: bool) -> None:
    """Recreate ``cl_changesets`` (SQLite only) with or without its ``rowid``, keeping its rows."""
    if op.get_context().dialect.name != "sqlite":
        return
    op.create_table(
        "_cl_changesets_new",
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("version", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("changeset_id", CHANGESET_ID, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_changesets_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("conversation_id", "version", name=op.f("pk_cl_changesets")),
        sqlite_with_rowid=with_rowid,
    )
    op.execute(f"INSERT INTO _cl_changesets_new ({_COLUMNS}) SELECT {_COLUMNS} FROM cl_changesets")
    op.drop_table("cl_changesets")
    op.rename_table("_cl_changesets_new", "cl_changesets")


def upgrade() -> None:
    _rebuild(with_rowid=False)


def downgrade() -> None:
    _rebuild(with_rowid=True)
