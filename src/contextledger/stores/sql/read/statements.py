"""Every listing of the SQL store as one SQLAlchemy Core statement: the single definition of each read.

A listing's filters that may be absent (an agent, a trigger, a cursor...) are *flags*:
:func:`statement` builds the statement of one set of flags, each value a named
``bindparam`` the caller binds by name. The engine runs these statements; the SQLite
reader runs the same statements compiled to SQL text by ``scripts/generate_sqlite_sql.py``
(:mod:`.sqlite_sql`), so both paths run one definition with the same joins, filters,
order and query plans.

A flag set is a sorted tuple of flag names (``()``: none). ``limit`` takes the first rows
of the order, ``last`` the last ones (the statement then orders backwards; the listing
turns the rows round, so a page is always oldest first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import cache
from itertools import combinations
from typing import Any

from sqlalchemy import (
    JSON,
    Select,
    String,
    Text,
    and_,
    bindparam,
    cast,
    exists,
    func,
    literal_column,
    null,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.orm import aliased
from sqlalchemy.sql.expression import Executable

from contextledger.stores.sql.fields import ENTRIES, LINEAGE, PIN_EVENTS
from contextledger.stores.sql.models import (
    ConversationRow,
    EntryRow,
    LineageRow,
    PinEventRow,
    ReductionRow,
    RevisionRow,
    ScopeStateRow,
    SessionRow,
    SummaryRow,
    SummarySourceRow,
)
from contextledger.stores.sql.read import records

__all__ = ["FLAGS", "flag_sets", "statement"]

PAGING = ("after", "before", "last", "limit")
"""The flags of a paged listing: a cursor on either side and a count from either end."""

FLAGS: dict[str, tuple[str, ...]] = {
    "history": ("active_only", *PAGING),
    "conversation_id": (),
    "entries": ("created_at", "from_call", "version"),
    "summaries": ("agent", *PAGING),
    "summary_sources": (),
    "reductions": ("agent", *PAGING),
    "revisions": ("message",),
    "pin_history": ("agent", *PAGING),
    "evictions": ("agent", "since", "trigger", *PAGING),
    "agents": (),
    "sessions": ("app", "user"),
    "session_details": (),
    "owner": (),
    "scope_state": (),
    "lineage": ("agent",),
}
"""Each statement's optional flags (the statement names are the keys of :mod:`.sqlite_sql`'s table)."""


def flag_sets(name: str) -> Iterator[tuple[str, ...]]:
    """Every valid flag set of the statement ``name``, each sorted (``limit`` and ``last`` exclude each other)."""
    flags = FLAGS[name]
    for size in range(len(flags) + 1):
        for chosen in combinations(flags, size):
            if not {"limit", "last"} <= set(chosen):
                yield tuple(sorted(chosen))


@cache
def statement(name: str, flags: tuple[str, ...]) -> Executable:
    """The statement ``name`` with the filters ``flags`` (built once per flag set; binds by name)."""
    unknown = set(flags) - set(FLAGS[name])
    if unknown:
        raise ValueError(f"statement {name!r} has no flags {sorted(unknown)}")
    built: Executable = _BUILDERS[name](frozenset(flags))
    return built


def _paged(stmt: Select[*tuple[Any, ...]], flags: frozenset[str], key: Sequence[Any]) -> Select[*tuple[Any, ...]]:
    """``stmt`` ordered by ``key`` (the listing's cursor, unique), cut to the page ``flags`` name.

    Keyset paging: ``after`` / ``before`` bind the cursor's values as ``after_0``,
    ``after_1``... and compare them with the key as a row value, so a page reads its rows
    only; ``last`` orders backwards (the listing turns the rows round).
    """

    def bound(name: str) -> Any:
        return tuple_(*(bindparam(f"{name}_{i}", type_=column.type) for i, column in enumerate(key)))

    if "after" in flags:
        stmt = stmt.where(tuple_(*key) > bound("after"))
    if "before" in flags:
        stmt = stmt.where(tuple_(*key) < bound("before"))
    if "last" in flags:
        return stmt.order_by(*(column.desc() for column in key)).limit(bindparam("last"))
    stmt = stmt.order_by(*key)
    return stmt.limit(bindparam("limit")) if "limit" in flags else stmt


def _conversation(flags: frozenset[str]) -> list[Any]:
    """The session (and, with the ``agent`` flag, the agent) a listing reads."""
    clauses: list[Any] = [ConversationRow.session_id == bindparam("session_id")]
    if "agent" in flags:
        clauses.append(ConversationRow.agent_id == bindparam("agent_id"))
    return clauses


HISTORY_COLUMNS = (
    EntryRow.message_id,
    EntryRow.role,
    # The JSON columns as the text stored: the records parse each once, into the
    # message (see records.history_entries), as a restore does.
    cast(EntryRow.content, Text).label("content"),
    cast(EntryRow.metadata_, Text).label("meta"),
    *ENTRIES.columns(),
)
"""A history row's columns: the message's four, then the entry's stored fields (:data:`.fields.ENTRIES`) in order."""
if tuple(select(*HISTORY_COLUMNS).selected_columns.keys()) != records.HISTORY_COLUMNS:  # the decoder's order
    raise TypeError(f"the history columns are not {records.HISTORY_COLUMNS}, the order the rows are decoded in")


def _history(flags: frozenset[str]) -> Executable:
    stmt = (
        select(*HISTORY_COLUMNS)
        .join(ConversationRow, ConversationRow.id == EntryRow.conversation_id)
        .where(*_conversation(flags | {"agent"}))
    )
    # Keyset paging on seq (unique within a conversation): a page reads its rows only.
    if "after" in flags:
        stmt = stmt.where(EntryRow.seq > bindparam("after"))
    if "before" in flags:
        stmt = stmt.where(EntryRow.seq < bindparam("before"))
    count = "last" if "last" in flags else "limit" if "limit" in flags else None
    if count is None:
        if "active_only" in flags:
            stmt = stmt.where(EntryRow.status == "active")
        return stmt.order_by(EntryRow.seq, EntryRow.id)
    # A counted page walks the (conversation_id, status, seq) index once per status and
    # stops after `count` rows of each: ordering both statuses at once would sort every
    # row past the cursor, for every page (quadratic over a stream).
    backwards = count == "last"
    statuses = ("active",) if "active_only" in flags else ("active", "evicted")
    branches = [
        stmt.where(EntryRow.status == status)
        .order_by(EntryRow.seq.desc() if backwards else EntryRow.seq)
        .limit(bindparam(count))
        .subquery()
        for status in statuses
    ]
    if len(branches) == 1:
        return select(branches[0])
    both = union_all(*(select(branch) for branch in branches)).subquery()
    return select(both).order_by(both.c.seq.desc() if backwards else both.c.seq).limit(bindparam(count))


def _conversation_id(flags: frozenset[str]) -> Executable:
    return select(ConversationRow.id).where(*_conversation(flags | {"agent"}))


def _entries(flags: frozenset[str]) -> Executable:
    stmt = select(*HISTORY_COLUMNS).where(
        EntryRow.conversation_id == bindparam("conversation_id"),
        EntryRow.message_id.in_(bindparam("ids", expanding=True)),
    )
    for name in sorted(flags):  # the bounds of an AppendedBy cut
        stmt = stmt.where(getattr(EntryRow, name) <= bindparam(name))
    return stmt


def _summaries(flags: frozenset[str]) -> Executable:
    stmt = (
        select(SummaryRow, ConversationRow.agent_id)
        .join(ConversationRow, ConversationRow.id == SummaryRow.conversation_id)
        .where(*_conversation(flags))
    )
    return _paged(stmt, flags, (SummaryRow.created_at, ConversationRow.agent_id, SummaryRow.summary_id))


def _summary_sources(flags: frozenset[str]) -> Executable:
    return (
        select(SummarySourceRow.summary_row_id, SummarySourceRow.entry_id)
        .where(SummarySourceRow.summary_row_id.in_(bindparam("ids", expanding=True)))
        .order_by(SummarySourceRow.summary_row_id, SummarySourceRow.position)
    )


def _reductions(flags: frozenset[str]) -> Executable:
    stmt = (
        select(ReductionRow, ConversationRow.agent_id)
        .join(ConversationRow, ConversationRow.id == ReductionRow.conversation_id)
        .where(*_conversation(flags))
    )
    return _paged(stmt, flags, (ReductionRow.created_at, ConversationRow.agent_id, ReductionRow.version))


def _revisions(flags: frozenset[str]) -> Executable:
    stmt = (
        select(RevisionRow)
        .join(ConversationRow, ConversationRow.id == RevisionRow.conversation_id)
        .where(*_conversation(flags | {"agent"}))
    )
    if "message" in flags:
        stmt = stmt.where(RevisionRow.message_id == bindparam("message_id"))
    return stmt.order_by(RevisionRow.id)


def _pin_history(flags: frozenset[str]) -> Executable:
    stmt = (
        select(ConversationRow.agent_id, *PIN_EVENTS.columns())
        .join(ConversationRow, ConversationRow.id == PinEventRow.conversation_id)
        .where(*_conversation(flags))
    )
    key = (PinEventRow.created_at, ConversationRow.agent_id, PinEventRow.version, PinEventRow.position)
    return _paged(stmt, flags, key)


def _evictions(flags: frozenset[str]) -> Executable:
    """Evicted messages and summaries with their reduction and replacing summary: one UNION ALL."""
    reduction = aliased(ReductionRow)
    source = aliased(SummarySourceRow)
    replacing = aliased(SummaryRow)
    evicted_summary = aliased(SummaryRow)
    filters = _conversation(flags)
    if "trigger" in flags:
        filters.append(reduction.trigger == bindparam("trigger"))
    if "since" in flags:
        filters.append(reduction.created_at >= bindparam("since"))
    common = (
        reduction.created_at.label("evicted_at"),
        reduction.trigger.label("trigger"),
        reduction.strategy.label("strategy"),
        reduction.reduction_id.label("reduction_id"),
        reduction.error.label("error"),
        replacing.summary_id.label("replaced_by"),
        ConversationRow.agent_id.label("agent_id"),
    )
    messages = (
        select(
            EntryRow.message_id.label("entry_id"),
            literal_column("'message'", String()).label("kind"),
            EntryRow.seq.label("seq"),
            EntryRow.role.label("role"),
            EntryRow.content.label("content"),
            cast(null(), Text).label("text"),
            *common,
        )
        .select_from(EntryRow)
        .join(ConversationRow, ConversationRow.id == EntryRow.conversation_id)
        .join(
            reduction,
            and_(reduction.conversation_id == EntryRow.conversation_id, reduction.reduction_id == EntryRow.evicted_by),
        )
        .outerjoin(
            source, and_(source.conversation_id == EntryRow.conversation_id, source.entry_id == EntryRow.message_id)
        )
        .outerjoin(replacing, replacing.id == source.summary_row_id)
        .where(EntryRow.status == "evicted", *filters)
    )
    summaries = (
        select(
            evicted_summary.summary_id.label("entry_id"),
            literal_column("'summary'", String()).label("kind"),
            evicted_summary.seq.label("seq"),
            literal_column("'user'", String()).label("role"),
            literal_column("NULL", JSON()).label("content"),
            evicted_summary.content.label("text"),
            *common,
        )
        .select_from(evicted_summary)
        .join(ConversationRow, ConversationRow.id == evicted_summary.conversation_id)
        .join(
            reduction,
            and_(
                reduction.conversation_id == evicted_summary.conversation_id,
                reduction.reduction_id == evicted_summary.evicted_by,
            ),
        )
        .outerjoin(
            source,
            and_(
                source.conversation_id == evicted_summary.conversation_id,
                source.entry_id == evicted_summary.summary_id,
            ),
        )
        .outerjoin(replacing, replacing.id == source.summary_row_id)
        .where(evicted_summary.status == "evicted", *filters)
    )
    both = union_all(messages, summaries).subquery()
    key = (both.c.evicted_at, both.c.agent_id, both.c.seq, both.c.kind, both.c.entry_id)
    return _paged(select(both), flags, key)


def _agents(flags: frozenset[str]) -> Executable:
    return (
        select(ConversationRow.agent_id)
        .where(ConversationRow.session_id == bindparam("session_id"))
        .order_by(ConversationRow.agent_id)
    )


def _sessions(flags: frozenset[str]) -> Executable:
    updated = func.max(ConversationRow.updated_at)
    stmt = (
        select(
            ConversationRow.session_id,
            func.min(ConversationRow.created_at).label("created_at"),
            updated.label("updated_at"),
            SessionRow.app,
            SessionRow.user_id,
        )
        .join(SessionRow, SessionRow.session_id == ConversationRow.session_id)
        .group_by(ConversationRow.session_id, SessionRow.app, SessionRow.user_id)
        .order_by(updated.desc(), ConversationRow.session_id.desc())
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )
    if "app" in flags:
        stmt = stmt.where(SessionRow.app == bindparam("app"))
    if "user" in flags:
        stmt = stmt.where(SessionRow.user_id == bindparam("user"))
    return stmt


def _session_details(flags: frozenset[str]) -> Executable:
    def count(model: type[EntryRow] | type[SummaryRow], *, active: bool) -> Any:
        clauses = [model.conversation_id == ConversationRow.id]
        if active:
            clauses.append(model.status == "active")
        return select(func.count()).select_from(model).where(*clauses).scalar_subquery()

    return (
        select(
            ConversationRow.session_id,
            ConversationRow.agent_id,
            (count(EntryRow, active=True) + count(SummaryRow, active=True)).label("active"),
            (count(EntryRow, active=False) + count(SummaryRow, active=False)).label("total"),
        )
        .where(ConversationRow.session_id.in_(bindparam("ids", expanding=True)))
        .order_by(ConversationRow.session_id, ConversationRow.agent_id)
    )


def _owner(flags: frozenset[str]) -> Executable:
    return (
        select(SessionRow.app, SessionRow.user_id)
        .where(SessionRow.session_id == bindparam("session_id"))
        .where(exists().where(ConversationRow.session_id == SessionRow.session_id))
    )


def _scope_state(flags: frozenset[str]) -> Executable:
    return select(ScopeStateRow.key, ScopeStateRow.value).where(
        ScopeStateRow.app == bindparam("app"), ScopeStateRow.user_id == bindparam("user")
    )


def _lineage(flags: frozenset[str]) -> Executable:
    return (
        select(ConversationRow.agent_id, *LINEAGE.columns())
        .join(ConversationRow, ConversationRow.id == LineageRow.conversation_id)
        .where(*_conversation(flags))
        .order_by(LineageRow.created_at, LineageRow.depth, LineageRow.id)
    )


_BUILDERS: dict[str, Callable[[frozenset[str]], Executable]] = {
    "history": _history,
    "conversation_id": _conversation_id,
    "entries": _entries,
    "summaries": _summaries,
    "summary_sources": _summary_sources,
    "reductions": _reductions,
    "revisions": _revisions,
    "pin_history": _pin_history,
    "evictions": _evictions,
    "agents": _agents,
    "sessions": _sessions,
    "session_details": _session_details,
    "owner": _owner,
    "scope_state": _scope_state,
    "lineage": _lineage,
}
