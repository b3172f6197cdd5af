"""Defaults of the SQL store's options, importable without SQLAlchemy (they appear in signatures)."""

from __future__ import annotations

__all__ = ["DEFAULT_BUSY_TIMEOUT", "DEFAULT_LOCK_TIMEOUT", "DEFAULT_STATEMENT_TIMEOUT"]

DEFAULT_BUSY_TIMEOUT = 30.0
"""SQLite: seconds a connection waits for a lock before failing."""
DEFAULT_LOCK_TIMEOUT = 5.0
"""PostgreSQL: seconds a statement waits for a lock before failing with ``StoreTimeout``."""
DEFAULT_STATEMENT_TIMEOUT = 30.0
"""PostgreSQL: seconds a statement may run before failing with ``StoreTimeout``."""
