"""Erasure: one entry's content removed for good, in its conversation and every copy of it.

:func:`erase` removes the content of one message entry, its revisions, and the text of
every summary that covered it (directly or through a summary it superseded): those
summaries are marked redacted, or re-summarized when a summarizer is given. A
:class:`~contextledger.model.records.Tombstone` (entry id, when, why) stays, so the audit
trail says that something was erased and why. The entry keeps its place (and its
tool-pair structure, emptied) so the view stays one a provider accepts. One atomic
operation per conversation on every store, and it follows lineage: every fork (of a
fork...) that holds the entry is erased too (:func:`catch_up` reaches a fork taken
meanwhile), and copies in other ledgers are erased when given or reported. The store is
then asked to make the bytes leave its files (:func:`settle_erasure`). The
:class:`Erasure` report says what is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    EntryNotFound,
    ErasurePending,
    SessionNotFound,
)
from contextledger.history.lineage import copies, descendants
from contextledger.history.redaction import PRUNE_REASON, REDACTED_TEXT, erase_blocks, summaries_covering
from contextledger.model.messages import Message
from contextledger.model.records import HistoryEntry, LineageLink, SummaryEntry, Tombstone, ViewEntry, utcnow
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import ERASURE, HISTORY, TIME_TRAVEL, SettlesErasure, with_lineage

__all__ = ["DEFAULT_SETTLE_TIMEOUT", "Erasure", "catch_up", "erase", "settle_erasure"]

logger = logging.getLogger(__name__)

DEFAULT_SETTLE_TIMEOUT = 5.0
"""Seconds an erase waits for other readers of a SQLite file before reporting its bytes as pending."""
_ATTEMPTS = 3

Summarizer = Callable[[Sequence[ViewEntry]], str]


@dataclass(frozen=True)
class Erasure:
    """What :func:`erase` did: the tombstones it left, and what it could not reach.

    Attributes:
        tombstone: The tombstone in the conversation named.
        descendants: One tombstone per fork (of a fork...) in this ledger that held the entry.
        elsewhere: The erasures made in other ledgers passed as ``also`` (copies made there by ``copy_to``).
        copies: Copies in other ledgers that were not erased: erase there too (pass
            those ledgers as ``also``). Each names the (masked) URL of its ledger.
        pending: ``None`` when the erased bytes have left the files this ledger writes;
            else why they may not have yet, and what to do (see
            :meth:`~contextledger.Ledger.settle_erasure`).
    """

    tombstone: Tombstone
    descendants: tuple[Tombstone, ...] = ()
    elsewhere: tuple[Erasure, ...] = ()
    copies: tuple[LineageLink, ...] = ()
    pending: str | None = None

    @property
    def tombstones(self) -> tuple[Tombstone, ...]:
        """Every tombstone left in this ledger (the one named first)."""
        return (self.tombstone, *self.descendants)

    @property
    def complete(self) -> bool:
        """Whether every copy the ledgers know of is erased and no erased byte is known to remain on disk."""
        return self.pending is None and not self.copies and all(e.complete for e in self.elsewhere)

    def raise_if_incomplete(self) -> None:
        """Raise unless :attr:`complete`.

        Raises:
            ErasurePending: Bytes may remain on disk, or copies in other ledgers were not erased.
        """
        if self.complete:
            return
        reasons = []
        if self.pending:
            reasons.append(self.pending)
        if self.copies:
            where = ", ".join(sorted({f"{c.child_session_id} in {c.ledger}" for c in self.copies}))
            reasons.append(f"copies in other ledgers were not erased ({where}): erase there too")
        reasons += [f"in {e.tombstone.session_id}: {r}" for e in self.elsewhere if not e.complete for r in [_why(e)]]
        raise ErasurePending(f"entry {self.tombstone.entry_id} erased, but: " + "; ".join(reasons), erasure=self)


def _why(erasure: Erasure) -> str:
    try:
        erasure.raise_if_incomplete()
    except ErasurePending as exc:
        return str(exc)
    return ""  # pragma: no cover - called for incomplete erasures only


def erase(
    store: LedgerStore,
    session_id: str,
    entry_id: str,
    *,
    reason: str,
    summarizer: Summarizer | None = None,
    agent_id: str | None = None,
    also: Sequence[LedgerStore] = (),
    settle_timeout: float = DEFAULT_SETTLE_TIMEOUT,
) -> Erasure:
    """Erase the message ``entry_id`` for good, in the conversation and every fork of it, and leave tombstones.

    The forks (and forks of forks) recorded under the conversation that hold the entry
    get the same erasure (content, revisions, the summaries covering it there and those
    copied from the ones redacted here), each with its own tombstone carrying the same
    reason; a fork made while this runs applies it itself (see :mod:`contextledger.history.lineage`).
    Copies made by ``copy_to`` into other ledgers are erased when those ledgers' stores are
    in ``also``, else listed in :attr:`Erasure.copies`. Afterwards the store is asked to
    make the bytes leave its files (:meth:`settle_erasure`), waiting at most
    ``settle_timeout`` seconds; what is left is said in :attr:`Erasure.pending`.

    Args:
        store: The ledger's store.
        session_id: The session.
        entry_id: The message to erase (a message id; summaries are redacted through it).
        reason: Why (kept on every tombstone), e.g. ``"GDPR request 42"``.
        summarizer: Re-writes each summary that covered the entry from its entries with
            the erased one emptied; without it those summaries read ``[redacted...]``.
        agent_id: The agent (default: whichever agent of the session holds the entry).
        also: Stores of other ledgers that hold copies (``copy_to``) to erase too.
        settle_timeout: Seconds to wait for other readers before saying the bytes are pending.

    Returns:
        The report (see :class:`Erasure`; :meth:`Erasure.raise_if_incomplete` turns what
        is left into an error).

    Raises:
        ConfigurationError: ``reason`` is empty, or the store keeps no lineage.
        SessionNotFound: The session (or agent) does not exist.
        EntryNotFound: No message of the session has that id.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError("erase needs a reason (kept on the tombstone)")
    with_lineage(store)
    agents = HISTORY.of(store, "erasure").agents(session_id)
    if agent_id is not None:
        agents = [a for a in agents if a == agent_id]
    if not agents:
        raise SessionNotFound(f"no session {session_id!r}" + (f" with agent {agent_id!r}" if agent_id else ""))
    for agent in agents:
        found = TIME_TRAVEL.of(store, "erasure").entries(session_id, agent, [entry_id])
        if found:
            break
    else:
        raise EntryNotFound(f"no message {entry_id!r} in session {session_id!r}")
    tombstone = _erase_row(store, session_id, agent, found[0], reason.strip(), summarizer, ())
    reached: list[Tombstone] = []
    forks = descendants(store, session_id, agent)
    for link in forks:
        copied = _erase_copy(
            store, link.child_session_id, link.child_agent_id, entry_id, tombstone.reason, summarizer, tombstone
        )
        if copied is not None:
            reached.append(copied)
    held = [(session_id, agent), *((link.child_session_id, link.child_agent_id) for link in forks)]
    unreached: list[LineageLink] = []
    elsewhere: list[Erasure] = []
    reached_there: dict[int, set[tuple[str, str]]] = {}
    # nearest first: a copy of the conversation itself reaches the copies of its forks there
    for link in sorted(copies(store, held), key=lambda link: held.index((link.session_id, link.agent_id))):
        other = next((o for o in also if o.url == link.ledger), None)
        if other is None:
            unreached.append(link)
            continue
        done = reached_there.setdefault(id(other), set())
        if (link.child_session_id, link.child_agent_id) in done:
            continue
        if not TIME_TRAVEL.of(other, "erasure").entries(link.child_session_id, link.child_agent_id, [entry_id]):
            continue
        rest = [o for o in also if o is not other]
        elsewhere.append(
            erase(
                other,
                link.child_session_id,
                entry_id,
                reason=reason,
                summarizer=summarizer,
                agent_id=link.child_agent_id,
                also=rest,
                settle_timeout=settle_timeout,
            )
        )
        done.update((t.session_id, t.agent_id) for t in elsewhere[-1].tombstones)
    pending = settle_erasure(store, timeout=settle_timeout)
    logger.info(
        "session_id=<%s>, agent_id=<%s>, entry_id=<%s>, forks=<%d>, copies_left=<%d>, pending=<%s> | erased",
        session_id,
        agent,
        entry_id,
        len(reached),
        len(unreached),
        pending is not None,
    )
    return Erasure(
        tombstone=tombstone,
        descendants=tuple(reached),
        elsewhere=tuple(elsewhere),
        copies=tuple(unreached),
        pending=pending,
    )


def _erase_row(
    store: LedgerStore,
    session_id: str,
    agent: str,
    row: HistoryEntry,
    reason: str,
    summarizer: Summarizer | None,
    also_summaries: Sequence[str],
) -> Tombstone:
    """Erase ``row`` of one conversation: content, revisions, the summaries covering it (and ``also_summaries``)."""
    entry_id = row.message.message_id
    # Host metadata goes too; only the pin stays (it is not content, and the view keeps it).
    erased = Message(message_id=entry_id, role=row.message.role, content=erase_blocks(row.message.content)).with_pin(
        row.message.pinned
    )
    summaries = HISTORY.of(store, "erasure").summaries(session_id, agent)
    covering = summaries_covering(summaries, entry_id)
    named = {s.summary_id for s in covering}
    covering += [s for s in summaries if s.summary_id in set(also_summaries) and s.summary_id not in named]
    texts = {s.summary_id: REDACTED_TEXT for s in covering}
    if summarizer is not None and covering:
        texts = _resummarize(store, session_id, agent, covering, erased, summarizer)
    tombstone = Tombstone(
        session_id=session_id,
        agent_id=agent,
        entry_id=entry_id,
        reason=reason,
        erased_at=utcnow(),
        summaries=tuple(s.summary_id for s in covering),
    )
    for attempt in range(_ATTEMPTS):
        try:
            ERASURE.of(store, "erasure").erase(tombstone, erased, texts)
            break
        except ConcurrencyConflict:  # its revisions moved meanwhile (Redis): read again
            if attempt == _ATTEMPTS - 1:
                raise
    return tombstone


def _erase_copy(
    store: LedgerStore,
    session_id: str,
    agent: str,
    entry_id: str,
    reason: str,
    summarizer: Summarizer | None,
    origin: Tombstone,
) -> Tombstone | None:
    """Erase ``entry_id`` in a fork that holds it (``None`` when it does not)."""
    found = TIME_TRAVEL.of(store, "erasure").entries(session_id, agent, [entry_id])
    if not found:
        return None
    tombstone = _erase_row(store, session_id, agent, found[0], reason, summarizer, origin.summaries)
    logger.info(
        "session_id=<%s>, agent_id=<%s>, entry_id=<%s>, from_session=<%s> | erased in a fork",
        session_id,
        agent,
        entry_id,
        origin.session_id,
    )
    return tombstone


def catch_up(store: LedgerStore, chain: Sequence[tuple[str, str]], session_id: str, agent_id: str) -> int:
    """Apply to a new fork the erasures its ancestors hold for entries it copied; return how many.

    Run by :func:`contextledger.history.fork.fork` after its commit, so an erase that committed
    while the fork was copying its parent still reaches it; it also gives the fork a
    tombstone for each erased entry it holds (whose content it copied erased already).
    """
    have = {t.entry_id for t in ERASURE.of(store, "erasure").tombstones(session_id, agent_id)}
    done = 0
    for sid, aid in chain:
        for tombstone in ERASURE.of(store, "erasure").tombstones(sid, aid):
            if tombstone.reason == PRUNE_REASON or tombstone.entry_id in have:
                continue
            found = TIME_TRAVEL.of(store, "erasure").entries(session_id, agent_id, [tombstone.entry_id])
            if not found:
                continue
            row = found[0]
            already = list(row.message.content) == erase_blocks(row.message.content)
            # Copied erased already: the tombstone alone (its summaries were copied redacted, or re-written).
            names = () if already else tombstone.summaries
            erased = _erase_row(store, session_id, agent_id, row, tombstone.reason, None, names)
            have.add(erased.entry_id)
            done += 1
    return done


def settle_erasure(store: LedgerStore, *, timeout: float = DEFAULT_SETTLE_TIMEOUT, vacuum: bool = False) -> str | None:
    """Ask the store to make erased bytes leave its files; ``None`` when they have, else why not and what to do.

    See :class:`~contextledger.stores.capabilities.SettlesErasure`; a store without that
    capability holds nothing on disk (memory) and gives ``None``.
    """
    if isinstance(store, SettlesErasure):
        return store.settle_erasure(timeout=timeout, vacuum=vacuum)
    return None


def _resummarize(
    store: LedgerStore,
    session_id: str,
    agent_id: str,
    covering: Sequence[SummaryEntry],
    erased: Message,
    summarizer: Summarizer,
) -> dict[str, str]:
    ids = {i for s in covering for i in s.replaces}
    rows = {
        h.message.message_id: h for h in TIME_TRAVEL.of(store, "erasure").entries(session_id, agent_id, sorted(ids))
    }
    texts: dict[str, str] = {}
    for summary in covering:  # oldest first: a superseding summary sees its predecessor rewritten
        entries: list[ViewEntry] = []
        for i in summary.replaces:
            if i == erased.message_id:
                entries.append(ViewEntry(entry_id=i, seq=rows[i].seq if i in rows else 0, message=erased))
            elif i in rows:
                entries.append(ViewEntry(entry_id=i, seq=rows[i].seq, message=rows[i].message, tokens=rows[i].tokens))
            elif i in texts:
                message = Message(message_id=i, role="user", content=[{"text": texts[i]}])
                entries.append(ViewEntry(entry_id=i, kind="summary", seq=0, message=message))
        texts[summary.summary_id] = summarizer(entries) if entries else REDACTED_TEXT
    return texts
