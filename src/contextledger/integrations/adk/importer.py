"""Import the sessions of an ADK ``DatabaseSessionService`` database into a ledger.

``import_adk_database("sqlite:///sessions.db", ledger)`` (or ``contextledger import adk
DB_URL --url URL``) reads every session of the database through ADK's own
``DatabaseSessionService`` -- so both of its schemas are read as ADK reads them -- and
writes each as the ledger session :class:`~contextledger.integrations.adk.LedgerSessionService`
would have written: the events in order under their ids, the session-scoped state, the
app's and the user's state, and each compaction event as a recorded reduction with its
summary. The app names are read from the database's ``sessions`` table (ADK has no call
that lists them) unless given.

Events are written in commits of up to :data:`BATCH` events (a compaction event commits
with its reduction), so an import interrupted half-way leaves a prefix, which the next
import completes. Importing again changes nothing: a session the ledger already holds
with the same events is ``unchanged``; one holding other events is left alone,
``skipped``. Nothing in the ADK database is changed or deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from google.adk.events import Event
from google.adk.sessions import Session
from google.adk.sessions.database_session_service import DatabaseSessionService
from sqlalchemy import String, column, func, inspect, select, table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from contextledger.core.changeset import Edit
from contextledger.core.view import View
from contextledger.errors import ConfigurationError, StoreUnavailable
from contextledger.integrations.adk.compaction import compaction_plan
from contextledger.integrations.adk.core import SessionCore
from contextledger.integrations.adk.events import event_to_message, ledger_session_id
from contextledger.integrations.adk.record import SessionRecord, split_state
from contextledger.ledger import Ledger
from contextledger.stores.urls import mask

__all__ = ["BATCH", "ImportReport", "ImportedSession", "count_events", "import_adk_database"]

logger = logging.getLogger(__name__)

BATCH = 500
"""Events per commit of an import."""

Outcome = Literal["imported", "unchanged", "skipped"]

_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}


@dataclass(frozen=True)
class ImportedSession:
    """What happened to one ADK session.

    Attributes:
        app_name: The ADK app.
        user_id: The ADK user.
        session_id: The ADK session id.
        ledger_id: The ledger session it was written to.
        outcome: ``imported``, ``unchanged`` (already imported) or ``skipped`` (the ledger
            holds other events under this id; left alone).
        events: Events read.
        compactions: Of those, compaction events recorded as reductions.
    """

    app_name: str
    user_id: str
    session_id: str
    ledger_id: str
    outcome: Outcome
    events: int = 0
    compactions: int = 0


@dataclass
class ImportReport:
    """Every session an import looked at, in order."""

    sessions: list[ImportedSession] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        """How many sessions had ``outcome``."""
        return sum(1 for s in self.sessions if s.outcome == outcome)


def _engine(db_url: str) -> AsyncEngine:
    try:
        url = make_url(db_url)
    except Exception as exc:
        raise ConfigurationError(f"not a database URL: {mask(db_url)!r} ({exc})") from exc
    driver = _ASYNC_DRIVERS.get(url.drivername)
    return create_async_engine(url.set(drivername=driver) if driver else url)


async def _app_names(engine: AsyncEngine, db_url: str) -> list[str]:
    async with engine.connect() as conn:
        tables = await conn.run_sync(lambda sync: set(inspect(sync).get_table_names()))
        if not {"sessions", "events"} <= tables:
            raise ConfigurationError(f"{mask(db_url)} holds no ADK DatabaseSessionService sessions (no sessions table)")
        names = select(column("app_name", String)).select_from(table("sessions")).distinct()
        return sorted(str(name) for name in (await conn.execute(names)).scalars())


async def count_events(db_url: str, app_names: Sequence[str] | None = None) -> int:
    """The events an import of ``db_url`` will read (for a progress bar).

    Raises:
        ConfigurationError: The URL is not a database URL, or the database holds no ADK sessions.
        StoreUnavailable: The database could not be read.
    """
    engine = _engine(db_url)
    try:
        apps = list(app_names) if app_names else await _app_names(engine, db_url)
        async with engine.connect() as conn:
            events = table("events", column("app_name"))
            stmt = select(func.count()).select_from(events).where(events.c.app_name.in_(apps))
            return int((await conn.execute(stmt)).scalar_one()) if apps else 0
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"cannot read {mask(db_url)}: {exc}") from exc
    finally:
        await engine.dispose()


async def import_adk_database(
    db_url: str,
    ledger: Ledger,
    *,
    app_names: Sequence[str] | None = None,
    agent_id: str = "default",
    on_event: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import the sessions of an ADK ``DatabaseSessionService`` database into ``ledger``.

    Args:
        db_url: The database (``sqlite:///sessions.db``, ``postgresql://...``; the asyncio
            driver ADK needs is chosen for these two).
        ledger: Where to write (a ledger on synchronous drivers).
        app_names: Only these apps (default: every app of the database).
        agent_id: The ledger conversation of each session (as given to the service).
        on_event: Called with the number of events read, as they are read (progress).

    Returns:
        One entry per session, app by app.

    Raises:
        ConfigurationError: The URL is not a database URL, or the database holds no ADK sessions.
        StoreUnavailable: The database could not be read.
    """
    engine = _engine(db_url)
    core = SessionCore(ledger, agent_id=agent_id, cache_size=1)
    report = ImportReport()
    try:
        apps = list(app_names) if app_names else await _app_names(engine, db_url)
        source = DatabaseSessionService(db_engine=engine)
        for app_name in apps:
            app_state: dict[str, object] = {}
            for listed in (await source.list_sessions(app_name=app_name)).sessions:
                session = await source.get_session(app_name=app_name, user_id=listed.user_id, session_id=listed.id)
                if session is None:  # deleted while the import ran
                    continue
                if on_event is not None and session.events:
                    on_event(len(session.events))
                deltas = split_state(session.state)
                app_state.update(deltas.app)
                report.sessions.append(_import_session(core, session))
                user_state = await source.get_user_state(app_name=app_name, user_id=session.user_id)
                if user_state:
                    ledger.update_user_state(app_name, session.user_id, split_state(user_state).session)
            if app_state:
                ledger.update_app_state(app_name, app_state)
    except SQLAlchemyError as exc:
        raise StoreUnavailable(f"cannot read {mask(db_url)}: {exc}") from exc
    finally:
        await engine.dispose()
    logger.info(
        "source=<%s>, imported=<%d>, unchanged=<%d>, skipped=<%d> | imported ADK sessions",
        mask(db_url),
        report.count("imported"),
        report.count("unchanged"),
        report.count("skipped"),
    )
    return report


def _import_session(core: SessionCore, session: Session) -> ImportedSession:
    """Write one session (or complete an interrupted import of it); see the module docstring."""
    key = ledger_session_id(session.app_name, session.user_id, session.id)
    messages = [event_to_message(e) for e in session.events]
    ids = [m.message_id for m in messages]
    stored = [h.message.message_id for h in core.ledger.history(key, core.agent_id)]
    compactions = sum(1 for e in session.events if e.actions is not None and e.actions.compaction is not None)
    found = ImportedSession(session.app_name, session.user_id, session.id, key, "imported", len(ids), compactions)
    if stored == ids and core.ledger.store.load(key, core.agent_id) is not None:
        return ImportedSession(**{**found.__dict__, "outcome": "unchanged"})
    if stored != ids[: len(stored)]:
        logger.warning("session_id=<%s> | the ledger holds other events under this id; not imported", key)
        return ImportedSession(**{**found.__dict__, "outcome": "skipped"})
    conversation = core.conversation(session.app_name, session.user_id, session.id)
    conversation.refresh()
    state = split_state(session.state).session
    pending: list[Event] = list(session.events[len(stored) :])
    if not pending and conversation.version == 0:  # a session without events
        record = SessionRecord(session.app_name, session.user_id, session.id, state, session.last_update_time)
        conversation.edit(lambda _view: Edit(agent_state=record.dump()))
    while pending:
        compacting = pending[0].actions is not None and pending[0].actions.compaction is not None
        batch = pending[:1] if compacting else _until_compaction(pending)
        pending = pending[len(batch) :]
        last = batch[-1]

        def build(view: View, batch: list[Event] = batch, last: Event = last, compacting: bool = compacting) -> Edit:
            previous = SessionRecord.of(conversation.agent_state, key) or SessionRecord(
                session.app_name, session.user_id, session.id, state, last.timestamp
            )
            plan, ranges = compaction_plan(view, previous, last) if compacting else (None, previous.compactions)
            record = SessionRecord(
                session.app_name, session.user_id, session.id, state, last.timestamp, last.id, ranges
            )
            return Edit(
                appends=tuple(event_to_message(e) for e in batch),
                agent_state=record.dump(),
                plan=plan,
                trigger="end_of_invocation",
                as_given=True,
            )

        conversation.edit(build)
    return found


def _until_compaction(events: Sequence[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events[:BATCH]:
        if event.actions is not None and event.actions.compaction is not None:
            break
        out.append(event)
    return out
