"""Stored values as the library reads them, on the engine and on SQLite's own driver alike.

SQLite stores timestamps as naive UTC text, booleans as integers and JSON as text; the
engine's column types (:class:`~contextledger.stores.sql.models.UTCDateTime`, the
engine's JSON deserializer) and the SQLite reader both decode through these functions,
so the two paths return equal values. This module imports no SQLAlchemy.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from contextledger.stores.sql.encoding import tolerant_sqlite_loads

__all__ = ["DECODERS", "aware_utc", "flag", "sqlite_time", "stored_json", "stored_time"]


def aware_utc(value: datetime) -> datetime:
    """``value`` as aware UTC (a naive value is taken to be UTC already)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sqlite_time(value: datetime) -> str:
    """A timestamp as the engine binds it on SQLite: naive UTC text (aware values converted, naive ones taken as UTC).

    Stored timestamps are this text, so comparisons with it order by time.
    """
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(sep=" ", timespec="microseconds")


_last_time: tuple[str, datetime] = ("", datetime.min)


def stored_time(value: Any) -> Any:
    """A stored timestamp as aware UTC (SQLite text or a driver's datetime); ``None`` stays."""
    global _last_time
    if value is None:
        return None
    if isinstance(value, str):
        # The rows of one commit share its timestamp, and a listing reads them in order:
        # the last text parsed is often the next one (a datetime is immutable, so shared).
        last = _last_time
        if last[0] == value:
            return last[1]
        parsed = aware_utc(datetime.fromisoformat(value))
        _last_time = (value, parsed)
        return parsed
    return aware_utc(value)


def stored_json(value: Any) -> Any:
    """A JSON column as SQLite stores it (text; a bare number is taken as it is); ``None`` stays."""
    if value is None or isinstance(value, int | float):
        return value
    return tolerant_sqlite_loads(value)


def flag(value: Any) -> Any:
    """A stored boolean (SQLite: an integer) as ``bool``; ``None`` stays."""
    return None if value is None else bool(value)


DECODERS = {"j": stored_json, "t": stored_time, "b": flag}
"""The decoder of each kind of column, by the letter :mod:`.sqlite_sql` gives it (``-``: taken as it is)."""
