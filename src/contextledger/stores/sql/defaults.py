"""The SQL store's engine options, declared once, importable without SQLAlchemy.

:meth:`~contextledger.stores.sql.SQLStore.from_url` and
:func:`~contextledger.stores.sql.engine.build_engine` both take them as keyword arguments
and read them through :class:`EngineOptions`, so each option, its type and its default
live here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["DEFAULT_BUSY_TIMEOUT", "DEFAULT_LOCK_TIMEOUT", "DEFAULT_STATEMENT_TIMEOUT", "EngineOptions"]

DEFAULT_BUSY_TIMEOUT = 30.0
"""SQLite: seconds a connection waits for a lock before failing."""
DEFAULT_LOCK_TIMEOUT = 5.0
"""PostgreSQL: seconds a statement waits for a lock before failing with ``StoreTimeout``."""
DEFAULT_STATEMENT_TIMEOUT = 30.0
"""PostgreSQL: seconds a statement may run before failing with ``StoreTimeout``."""

# Options the SQLite reader honours itself; any other one set (echo, pools, driver
# arguments, create_engine's own) needs the engine.
_READER_OPTIONS = frozenset({"busy_timeout", "read_only", "connect_timeout", "lock_timeout", "statement_timeout"})


@dataclass(frozen=True)
class EngineOptions:
    """How the SQL store builds its engine.

    Attributes:
        echo: Log every statement.
        pool_size: Connections kept open (``None``: SQLAlchemy's default).
        max_overflow: Extra connections beyond ``pool_size``.
        pool_timeout: Seconds to wait for a pooled connection.
        pool_recycle: Reconnect connections older than this many seconds.
        pool_pre_ping: Test each connection on checkout (one extra round trip).
        busy_timeout: SQLite: seconds a writer waits for the lock before failing.
        connect_timeout: PostgreSQL: seconds to wait for the server to answer.
        connect_args: Extra arguments for the driver's ``connect``.
        lock_timeout: PostgreSQL: seconds a statement waits for a lock held by another
            connection before it fails with ``StoreTimeout`` (``None``: wait forever). A
            ``lock_timeout`` already in ``connect_args["options"]`` wins.
        statement_timeout: PostgreSQL: seconds a statement may run before it fails with
            ``StoreTimeout`` (``None``: no limit). One in ``connect_args["options"]`` wins.
        read_only: Never write: SQLite opens the file with ``mode=ro`` (no WAL switch, no
            file created); PostgreSQL sessions default to read-only transactions.
        extra: Any other keyword, passed to :func:`sqlalchemy.create_engine` unchanged.
    """

    echo: bool = False
    pool_size: int | None = None
    max_overflow: int | None = None
    pool_timeout: float | None = None
    pool_recycle: int | None = None
    pool_pre_ping: bool = False
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    connect_timeout: int = 10
    connect_args: dict[str, Any] | None = None
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT
    statement_timeout: float | None = DEFAULT_STATEMENT_TIMEOUT
    read_only: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> EngineOptions:
        """The options named in ``options`` (keyword arguments); unknown names go to :attr:`extra`."""
        known = {f.name for f in fields(cls)} - {"extra"}
        return cls(
            **{k: v for k, v in options.items() if k in known},
            extra={k: v for k, v in options.items() if k not in known},
        )

    @property
    def reader_serves(self) -> bool:
        """Whether a plain SQLite file opened with these options can be read without the engine.

        Only the options the reader honours itself may differ from their defaults.
        """
        default = EngineOptions()
        return not self.extra and all(
            getattr(self, f.name) == getattr(default, f.name)
            for f in fields(self)
            if f.name not in _READER_OPTIONS and f.name != "extra"
        )

    @property
    def pools(self) -> dict[str, Any]:
        """The pool options that are set (the rest keep SQLAlchemy's defaults)."""
        names = ("pool_size", "max_overflow", "pool_timeout", "pool_recycle")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}
