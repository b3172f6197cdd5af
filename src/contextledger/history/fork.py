"""Fork a session: a new session that starts from the view (and history) of another at a call.

For branching conversations and replaying with another model: the fork holds every
message entry the original had appended up to the cut, the view the model saw then
(summary and pins included), and a ``fork`` reduction row (trigger ``import``) that
evicts what was no longer in that view and records where the fork came from -- so the
origin is a plain query (:func:`fork_origin`) and ``contextledger show`` prints it.

Each agent's fork is one atomic commit creating its conversation (version 1); the new
session must not exist. Before it, the fork is recorded under its parent and every
further ancestor (:mod:`contextledger.history.lineage`), so an erasure in any of them reaches it;
after it, erasures its ancestors made while it was being copied are applied to it.
"""

from __future__ import annotations

import json
import logging

from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError, SessionExists, SessionNotFound
from contextledger.history.lineage import FORK_STRATEGY, ForkOrigin, fork_origin
from contextledger.history.travel import travelling, view_at
from contextledger.model.records import Reduction, SummaryEntry, ViewEntry, new_id, utcnow
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import HISTORY, SCOPES, with_lineage

__all__ = ["FORK_STRATEGY", "ForkOrigin", "fork", "fork_origin"]

logger = logging.getLogger(__name__)


def fork(
    store: LedgerStore,
    session_id: str,
    new_session_id: str,
    *,
    at_call: int | None = None,
    agent_id: str | None = None,
) -> list[ForkOrigin]:
    """Create ``new_session_id`` from ``session_id`` as it stood at model call ``at_call`` (default: now).

    Args:
        store: The ledger's store.
        session_id: The session to fork.
        new_session_id: The new session (must not exist).
        at_call: Start from the input of this model call (``None``: the current view).
        agent_id: Fork only this agent (default: every agent of the session).

    Returns:
        The origin recorded for each forked agent.

    Raises:
        SessionNotFound: The session (or the agent) does not exist.
        SessionExists: ``new_session_id`` already has a conversation.
        ModelCallNotFound: An agent made no model call ``at_call``.
        ConfigurationError: ``new_session_id`` is not a non-empty string, or equals ``session_id``.
        ConcurrencyConflict: Another writer created the new session meanwhile (nothing is written).
    """
    if not isinstance(new_session_id, str) or not new_session_id or new_session_id == session_id:
        raise ConfigurationError(f"new_session_id must be a new, non-empty session id, got {new_session_id!r}")
    agents = HISTORY.of(store, "fork").agents(session_id)
    if agent_id is not None:
        agents = [a for a in agents if a == agent_id]
    if not agents:
        raise SessionNotFound(f"no session {session_id!r}" + (f" with agent {agent_id!r}" if agent_id else ""))
    if HISTORY.of(store, "fork").agents(new_session_id):
        raise SessionExists(f"session {new_session_id!r} already exists; a fork creates a new session")
    from contextledger.history.erasure import catch_up
    from contextledger.history.lineage import ancestors, fork_links

    lineage = with_lineage(store)
    plans = [
        _fork_changeset(store, session_id, a, new_session_id, at_call, ancestors(store, session_id, a)) for a in agents
    ]
    # A fork belongs to the app and user of its source: listed with their sessions, erased with them.
    owner = SCOPES.of(store, "fork").owner(session_id)
    origins = []
    for changeset, origin in plans:
        if owner is not None and (owner.app is not None or owner.user is not None):
            changeset = changeset.model_copy(update={"app": owner.app, "user": owner.user})
        lineage.add_lineage(fork_links(origin, new_session_id, origin.agent_id))  # before the commit: see lineage
        store.commit(changeset)
        catch_up(store, origin.ancestors, new_session_id, origin.agent_id)
        origins.append(origin)
        logger.info(
            "session_id=<%s>, agent_id=<%s>, new_session_id=<%s>, at_call=<%s> | forked",
            session_id,
            origin.agent_id,
            new_session_id,
            at_call,
        )
    return origins


def _fork_changeset(
    store: LedgerStore,
    session_id: str,
    agent_id: str,
    new_session_id: str,
    at_call: int | None,
    further: list[tuple[str, str]],
) -> tuple[Changeset, ForkOrigin]:
    snapshot = store.load(session_id, agent_id)
    if snapshot is None:
        raise SessionNotFound(f"no conversation {session_id!r} / {agent_id!r}")
    state = snapshot.state
    if at_call is None:
        view = list(snapshot.entries)
        history = HISTORY.of(store, "fork").history(session_id, agent_id)
    else:
        view = list(view_at(travelling(store, "fork"), session_id, agent_id, model_call=at_call))
        history = [h for h in HISTORY.of(store, "fork").history(session_id, agent_id) if h.from_call <= at_call]
    in_view = {e.entry_id: e for e in view}
    copied = [
        in_view.get(h.message.message_id)
        or ViewEntry(entry_id=h.message.message_id, seq=h.seq, message=h.message, tokens=h.tokens)
        for h in history
    ]
    summaries = [e for e in view if e.kind == "summary"]
    if len(summaries) > 1:
        raise ConfigurationError(
            f"cannot fork {session_id}/{agent_id}: its view holds {len(summaries)} summaries (a fork carries one)"
        )
    out_of_view = [e.entry_id for e in copied if e.entry_id not in in_view]
    reduction_id = new_id()
    summary: SummaryEntry | None = None
    if summaries:
        shown = summaries[0]
        original = next(
            (s for s in HISTORY.of(store, "fork").summaries(session_id, agent_id) if s.summary_id == shown.entry_id),
            None,
        )
        covered = [i for i in (original.replaces if original else ()) if i in set(out_of_view)]
        summary = SummaryEntry(
            summary_id=shown.entry_id,
            session_id=new_session_id,
            agent_id=agent_id,
            seq=shown.seq,
            content=shown.message.plain_text if original is None else original.content,
            summarizer=original.summarizer if original else FORK_STRATEGY,
            reduction_id=reduction_id,
            replaces=tuple(covered),
            tokens=shown.tokens,
        )
    replaced = set(summary.replaces) if summary else set()
    count = at_call if at_call is not None else state.model_call_count
    chain = ((session_id, agent_id), *further)
    detail = json.dumps(
        {
            "forked_from": session_id,
            "agent_id": agent_id,
            "at_call": at_call,
            "version": state.version,
            "ancestors": [list(pair) for pair in chain],
        },
        sort_keys=True,
    )
    reduction = Reduction(
        reduction_id=reduction_id,
        session_id=new_session_id,
        agent_id=agent_id,
        trigger="import",
        strategy=FORK_STRATEGY,
        messages_before=len(copied),
        messages_after=len(view),
        tokens_before=sum(e.tokens for e in copied),
        tokens_after=sum(e.tokens for e in view),
        evicted=tuple(out_of_view),
        summary_id=summary.summary_id if summary else None,
        model_call_count=count,
        detail=detail,
        from_call=count,
        version=1,
    )
    changeset = Changeset(
        session_id=new_session_id,
        agent_id=agent_id,
        expected_version=0,
        appends=tuple(e for e in copied if e.kind == "message"),
        evict=tuple(i for i in out_of_view if i not in replaced),
        summary=summary,
        reduction=reduction,  # always: it records where the fork came from
        from_call=count,
        model_call_count=count,
        next_seq=max((e.seq for e in copied), default=-1) + 1,
        manager_state=state.manager_state if at_call is None else None,
        agent_state=state.agent_state if at_call is None else None,
    )
    origin = ForkOrigin(
        session_id=session_id,
        agent_id=agent_id,
        at_call=at_call,
        version=state.version,
        forked_at=utcnow(),
        reduction_id=reduction_id,
        ancestors=chain,
    )
    return changeset, origin
