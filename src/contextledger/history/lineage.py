"""Lineage: which conversations were made from which, so erasure can follow every copy.

A fork (:func:`contextledger.history.fork.fork`) records, before its commit, one
:class:`~contextledger.model.records.LineageLink` under its parent *and under every ancestor
of the parent* (with the depth), so the descendants of a conversation are one read of
its own links -- and stay reachable when a session between them is deleted or expires.
The fork itself carries its whole chain of ancestors in its ``fork`` reduction (one
atomic commit with the fork, moved by export and copy), which is how a fork knows its
ancestors without another read and how :func:`register_forks` records the links of
forks that arrive by import or copy.

A copy made by :meth:`~contextledger.Ledger.copy_to` is recorded in the source ledger
as a ``copy`` link naming the target's (masked) URL: the source cannot reach into
another database by itself, so erasure reports those copies (and erases there when
given the target ledger).

Why links are written *before* the fork's commit: an erase that runs while a fork is
being made either sees the link (and erases in the fork, if the fork has committed) or
committed its tombstone before the link was written -- and the fork, after its commit,
applies every erasure its ancestors recorded (:func:`catch_up`). Either way the fork
never keeps an erased entry. A link whose fork then failed names a conversation that
does not exist; it is skipped when read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from contextledger.model.records import LineageLink, Reduction, utcnow
from contextledger.stores.capabilities import HISTORY, with_lineage

if TYPE_CHECKING:
    from contextledger.stores.base import LedgerStore

__all__ = [
    "FORK_STRATEGY",
    "ForkOrigin",
    "ancestors",
    "copies",
    "descendants",
    "fork_links",
    "fork_origin",
    "register_copies",
    "register_forks",
]

logger = logging.getLogger(__name__)

FORK_STRATEGY = "fork"
"""The strategy of the reduction that records a fork's origin."""


@dataclass(frozen=True)
class ForkOrigin:
    """Where a forked conversation came from.

    Attributes:
        session_id: The original session.
        agent_id: The original agent.
        at_call: The model call whose view the fork starts from (``None``: the view then current).
        version: The original conversation's version at the fork.
        forked_at: When the fork was committed.
        reduction_id: The ``fork`` reduction of the new conversation.
        ancestors: Every conversation it descends from, ``(session_id, agent_id)``, the
            parent first (empty for a fork recorded before 0.3: the parent alone is known).
    """

    session_id: str
    agent_id: str
    at_call: int | None
    version: int
    forked_at: datetime
    reduction_id: str
    ancestors: tuple[tuple[str, str], ...] = ()


def fork_origin(reductions: list[Reduction]) -> ForkOrigin | None:
    """Where a conversation was forked from, read from its ``fork`` reduction (``None``: not a fork)."""
    for red in reductions:
        if red.strategy == FORK_STRATEGY and red.trigger == "import" and red.detail:
            try:
                data = json.loads(red.detail)
                chain = tuple((str(s), str(a)) for s, a in data.get("ancestors", ()))
                return ForkOrigin(
                    session_id=str(data["forked_from"]),
                    agent_id=str(data["agent_id"]),
                    at_call=data["at_call"],
                    version=int(data["version"]),
                    forked_at=red.created_at,
                    reduction_id=red.reduction_id,
                    ancestors=chain,
                )
            except (ValueError, KeyError, TypeError):
                continue
    return None


def ancestors(store: LedgerStore, session_id: str, agent_id: str) -> list[tuple[str, str]]:
    """The conversations ``(session_id, agent_id)`` was forked from, nearest first (``[]``: not a fork).

    Read from its ``fork`` reduction, which names every ancestor (forks made before 0.3
    name the parent only; the parent's own origin is then read in turn).
    """
    chain: list[tuple[str, str]] = []
    current = (session_id, agent_id)
    seen = {current}
    while True:
        origin = fork_origin(HISTORY.of(store, "lineage").reductions(*current))
        if origin is None:
            return chain
        found = list(origin.ancestors) or [(origin.session_id, origin.agent_id)]
        for pair in found:
            if pair in seen:  # a cycle can only come from records edited by hand
                return chain
            seen.add(pair)
            chain.append(pair)
        if origin.ancestors:
            return chain
        current = chain[-1]


def fork_links(origin: ForkOrigin, child_session_id: str, child_agent_id: str) -> list[LineageLink]:
    """The links a fork records: one under its parent and one under each further ancestor."""
    chain = list(origin.ancestors) or [(origin.session_id, origin.agent_id)]
    return [
        LineageLink(
            session_id=sid,
            agent_id=aid,
            child_session_id=child_session_id,
            child_agent_id=child_agent_id,
            kind="fork",
            depth=depth,
            at_call=origin.at_call if depth == 1 else None,
            version=origin.version if depth == 1 else 0,
            created_at=origin.forked_at,
        )
        for depth, (sid, aid) in enumerate(chain, start=1)
    ]


def descendants(store: LedgerStore, session_id: str, agent_id: str) -> list[LineageLink]:
    """Every fork (of a fork...) of the conversation in this ledger that exists, nearest first.

    Copies to other ledgers are not among them (see :func:`copies`).
    """
    links = [link for link in with_lineage(store).lineage(session_id, agent_id) if link.ledger is None]
    out: dict[tuple[str, str], LineageLink] = {}
    agents: dict[str, list[str]] = {}
    for link in sorted(links, key=lambda link: (link.depth, link.created_at)):
        pair = (link.child_session_id, link.child_agent_id)
        if pair == (session_id, agent_id) or pair in out:
            continue
        if pair[0] not in agents:
            agents[pair[0]] = HISTORY.of(store, "lineage").agents(pair[0])
        if pair[1] in agents[pair[0]]:
            out[pair] = link
    return list(out.values())


def copies(store: LedgerStore, conversations: Sequence[tuple[str, str]]) -> list[LineageLink]:
    """The copies made to other ledgers of any of ``conversations`` (recorded by ``copy_to``)."""
    lineage = with_lineage(store)
    found: dict[str, LineageLink] = {}
    for session_id, agent_id in conversations:
        for link in lineage.lineage(session_id, agent_id):
            if link.ledger is not None:
                found.setdefault(f"{link.session_id}|{link.agent_id}|{link.key}", link)
    return list(found.values())


def register_forks(store: LedgerStore, conversations: Sequence[tuple[str, str]]) -> int:
    """Record the lineage of forks that arrived by import or copy, under their ancestors present in ``store``.

    Call it after a batch is written (a fork may arrive before its parent); a parent
    imported later than its fork, in another batch, does not learn of it. Idempotent.
    """
    links: list[LineageLink] = []
    for session_id, agent_id in conversations:
        origin = fork_origin(HISTORY.of(store, "lineage").reductions(session_id, agent_id))
        if origin is not None:
            links += fork_links(origin, session_id, agent_id)
    if not links:
        return 0
    added = with_lineage(store).add_lineage(links)
    logger.debug("conversations=<%d>, links=<%d> | recorded the lineage of imported forks", len(conversations), added)
    return added


def register_copies(source: LedgerStore, target_url: str, conversations: Sequence[tuple[str, str]]) -> int:
    """Record in ``source`` that ``conversations`` were copied to the ledger at ``target_url`` (masked)."""
    now = utcnow()
    links = []
    for session_id, agent_id in conversations:
        snapshot = source.load(session_id, agent_id)
        links.append(
            LineageLink(
                session_id=session_id,
                agent_id=agent_id,
                child_session_id=session_id,
                child_agent_id=agent_id,
                kind="copy",
                version=snapshot.state.version if snapshot is not None else 0,
                created_at=now,
                ledger=target_url,
            )
        )
    return with_lineage(source).add_lineage(links) if links else 0
