"""Apps and users: the app and user a session belongs to, and the key/value state of each.

Revision ID: 0006
Revises: 0005_lineage
Create Date: 2026-04-01 00:00:00

Two nullable columns and an index on ``cl_sessions`` (sessions written before belong to
no app and no user), and one new table, ``cl_scope_state``: one row per key of the state
of an app (``user_id`` empty) or of one user of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005_lineage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
ID = sa.String(length=255)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("cl_sessions", recreate="never") as batch:
        batch.add_column(sa.Column("app", ID, nullable=True))
        batch.add_column(sa.Column("user_id", ID, nullable=True))
    op.create_index("ix_cl_sessions_app_user_id", "cl_sessions", ["app", "user_id"])
    op.create_table(
        "cl_scope_state",
        sa.Column("app", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("key", ID, nullable=False),
        sa.Column("value", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("app", "user_id", "key", name=op.f("pk_cl_scope_state")),
    )


def downgrade() -> None:
    op.drop_table("cl_scope_state")
    op.drop_index("ix_cl_sessions_app_user_id", table_name="cl_sessions")
    # In place, never by recreating the table: on SQLite a recreated cl_sessions would be
    # dropped first, and every conversation cascades from it (SQLite >= 3.35 drops columns).
    with op.batch_alter_table("cl_sessions", recreate="never") as batch:
        batch.drop_column("user_id")
        batch.drop_column("app")
