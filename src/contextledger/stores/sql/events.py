"""Whether the engine's statement events would miss a statement sent on the driver itself.

The SQL store sends its hot writes (PostgreSQL's one-statement append, SQLite's hot
changesets) and, on a SQLite file, its reads on driver connections of its own, without
SQLAlchemy's execution machinery. A statement log or an instrumentation listening to the
engine (``echo``, ``before_cursor_execute`` / ``after_cursor_execute``) would not see
them, so each of those paths asks :func:`sends_on_driver` first and goes through
SQLAlchemy, where the listeners see every statement, while one is attached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = ["sends_on_driver"]


def sends_on_driver(engine: Engine) -> bool:
    """Whether a statement may go to the driver directly now: no statement event of ``engine`` would miss it.

    ``False`` when the engine has ``echo`` or ``before_cursor_execute`` /
    ``after_cursor_execute`` listeners (a statement log, an instrumentation): those see
    every statement only when it goes through SQLAlchemy. Checked on every call (a
    listener may be added at any time), by the held connections, the SQLite reader and
    the async API's native send alike.
    """
    dispatch = engine.dispatch
    return not (engine.echo or dispatch.before_cursor_execute or dispatch.after_cursor_execute)
