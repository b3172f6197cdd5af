"""``EncryptedStore``: any store, with content, summaries and state sealed before they reach it.

One layer for every backend (memory, SQLite, PostgreSQL, Redis): it implements the
store protocol by sealing what a changeset, an erase or an import writes (see
:mod:`contextledger.encryption` for what is sealed and what stays clear) and opening
what the reads return; the store under it never sees a plaintext value. Erasure keeps
working: an erase overwrites the sealed value (and the store's own erasure makes the old
bytes leave its files). Re-sealing under a new key (:mod:`contextledger.history.rotation`) uses
the stores' :meth:`reseal`, which swaps one token for another only where it still is.

``Ledger.connect(url, encryption=keyring)`` wraps the store it opens; the
``contextledger`` command does so when ``CONTEXTLEDGER_ENCRYPTION_KEYS`` is set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from contextledger.core.changeset import Changeset
from contextledger.encryption import KeyProvider, Sealer, sealed_token
from contextledger.model.bundle import ConversationRecords
from contextledger.model.messages import Message
from contextledger.model.paging import Page
from contextledger.model.records import (
    ConversationState,
    Eviction,
    Expiry,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Tombstone,
    Trigger,
)
from contextledger.model.stored import sealed_values_allowed
from contextledger.stores.base import AppendedBy, LedgerStore, preview
from contextledger.stores.capabilities import (
    ERASURE,
    HISTORY,
    SCOPES,
    SESSIONS,
    TIME_TRAVEL,
    TRANSFER,
    Capability,
    Swap,
    capabilities_of,
    expiring,
    resealing,
    with_lineage,
)
from contextledger.stores.sealing import Sealing, place

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C")

__all__ = ["EncryptedStore", "key_provider", "place", "with_encryption"]


def with_encryption(store: LedgerStore, encryption: object) -> LedgerStore:
    """``store`` sealed with the keys of ``encryption`` (a ``KeyProvider`` or a callable giving one), or as is.

    Raises:
        EncryptionKeyMissing: The callable gave no key provider.
        ConfigurationError: ``encryption`` is neither, or ``cryptography`` is not installed.
    """
    if encryption is None:
        return store
    try:
        provider = key_provider(encryption)
        sealer = Sealer(provider)
    except BaseException:
        store.close()  # opened for nothing
        raise
    return EncryptedStore(store, sealer)


def key_provider(encryption: object) -> KeyProvider:
    """The key provider ``encryption`` is or gives (what ``Ledger.connect(encryption=...)`` takes).

    Raises:
        EncryptionKeyMissing: A callable gave no key provider.
        ConfigurationError: ``encryption`` is neither a key provider nor a callable giving one.
    """
    from contextledger.errors import ConfigurationError, EncryptionKeyMissing

    provider = encryption() if callable(encryption) and not isinstance(encryption, KeyProvider) else encryption
    if provider is None:
        raise EncryptionKeyMissing("encryption was asked for but the key provider gave no key")
    if not isinstance(provider, KeyProvider):
        raise ConfigurationError(
            "encryption= takes a Keyring (or another KeyProvider), or a callable returning one; "
            f"got {type(provider).__name__}"
        )
    return provider


class EncryptedStore(Sealing):
    """A :class:`~contextledger.stores.base.LedgerStore` that seals content before it reaches ``inner``.

    Args:
        inner: The store that keeps the sealed values.
        sealer: Seals and opens them (its keys).

    Attributes not part of the protocol (``vacuum``, ``upgrade``, ``reader``...) are the
    inner store's.
    """

    def __init__(self, inner: LedgerStore, sealer: Sealer) -> None:
        self.inner = inner
        self.sealer = sealer
        self.url = inner.url

    @property
    def capabilities(self) -> frozenset[str]:
        """The inner store's capabilities: each is passed on, sealed (see :func:`capabilities_of`)."""
        return capabilities_of(self.inner)

    def _inner(self, capability: Capability[C]) -> C:
        return capability.of(self.inner, f"the encrypting store's {capability.name}")

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes this class lacks: the inner store's own (vacuum, upgrade, ...).
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"EncryptedStore({self.inner!r})"

    # -- the protocol: writes -------------------------------------------------------------

    def commit(self, changeset: Changeset) -> int:
        """Seal the changeset's content and state, then commit it to the inner store (see its contract)."""
        return self.inner.commit(self._seal_changeset(changeset))

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Erase through the inner store; the new (erased) values are sealed too."""
        sid, aid = tombstone.session_id, tombstone.agent_id
        texts = {k: self._seal_text(sid, aid, k, v) for k, v in summaries.items()}
        self._inner(ERASURE).erase(tombstone, self._seal_message(sid, aid, erased), texts)

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Prune through the inner store (nothing to seal)."""
        return self._inner(ERASURE).prune(session_id, agent_id, entry_ids, tombstones)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Seal the records' content and state, then import them into the inner store."""
        sid, aid = records.session_id, records.agent_id
        state = records.state.model_copy(
            update={
                "manager_state": self._seal_state(sid, aid, "manager_state", records.state.manager_state),
                "agent_state": self._seal_state(sid, aid, "agent_state", records.state.agent_state),
            }
        )
        sealed = records.model_copy(
            update={
                "state": state,
                "messages": tuple(
                    h.model_copy(update={"message": self._seal_message(sid, aid, h.message)}) for h in records.messages
                ),
                "summaries": tuple(
                    s.model_copy(update={"content": self._seal_text(sid, aid, s.summary_id, s.content)})
                    for s in records.summaries
                ),
                "revisions": tuple(
                    r.model_copy(
                        update={
                            "original": self.sealer.seal_content(
                                list(r.original), place(sid, aid, "content", r.message_id)
                            )
                        }
                    )
                    for r in records.revisions
                ),
            }
        )
        return self._inner(TRANSFER).import_conversation(sealed)

    def delete_session(self, session_id: str) -> bool:
        """Delete through the inner store."""
        return self._inner(SESSIONS).delete_session(session_id)

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

    # -- the protocol: reads --------------------------------------------------------------

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """The inner snapshot, opened."""
        snapshot = self.inner.load(session_id, agent_id)
        if snapshot is None:
            return None
        state = snapshot.state.model_copy(
            update={
                "manager_state": self._open_state(session_id, agent_id, "manager_state", snapshot.state.manager_state),
                "agent_state": self._open_state(session_id, agent_id, "agent_state", snapshot.state.agent_state),
            }
        )
        entries = tuple(self._open_entry(session_id, agent_id, e) for e in snapshot.entries)
        return Snapshot(state=state, entries=entries)

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The inner history (or one page of it), opened."""
        found = self._inner(HISTORY).history(session_id, agent_id, include_evicted=include_evicted, page=page)
        return [self._open_history(h) for h in found]

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The inner entries, opened."""
        return [
            self._open_history(h)
            for h in self._inner(TIME_TRAVEL).entries(session_id, agent_id, ids, appended_by=appended_by)
        ]

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """The inner summaries (or one page), opened."""
        return [self._open_summary(s) for s in self._inner(HISTORY).summaries(session_id, agent_id, page=page)]

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """The inner revisions, their originals opened."""
        out = []
        for r in self._inner(HISTORY).revisions(session_id, agent_id, message_id):
            if sealed_token(r.original) is None:
                out.append(r)
                continue
            original = self.sealer.open_content(r.original, place(session_id, agent_id, "content", r.message_id))
            out.append(r.model_copy(update={"original": original}))
        return out

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """The inner evictions (or one page), previews made from the opened content (the store saw only tokens)."""
        found = self._inner(HISTORY).evictions(session_id, agent_id, trigger=trigger, since=since, page=page)
        if not found:
            return found
        texts: dict[tuple[str, str], str] = {}
        for aid in sorted({e.agent_id for e in found}):
            wanted = [e.entry_id for e in found if e.agent_id == aid and e.kind == "message"]
            for h in self.entries(session_id, aid, wanted):
                texts[(aid, h.message.message_id)] = h.message.plain_text
            if any(e.agent_id == aid and e.kind == "summary" for e in found):
                for s in self.summaries(session_id, aid):
                    texts[(aid, s.summary_id)] = s.content
        return [
            e.model_copy(update={"preview": preview(texts[(e.agent_id, e.entry_id)])})
            if (e.agent_id, e.entry_id) in texts
            else e
            for e in found
        ]

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """The inner reductions (or one page; clear)."""
        return self._inner(HISTORY).reductions(session_id, agent_id, page=page)

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """The inner pin events (or one page; clear)."""
        return self._inner(HISTORY).pin_history(session_id, agent_id, page=page)

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """The inner tombstones (clear)."""
        return self._inner(ERASURE).tombstones(session_id, agent_id)

    def agents(self, session_id: str) -> list[str]:
        """The inner agents."""
        return self._inner(HISTORY).agents(session_id)

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """The inner sessions (clear, as session ids, apps and users are)."""
        return self._inner(SESSIONS).sessions(limit=limit, offset=offset, app=app, user=user)

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The inner state, opened."""
        state = self._inner(HISTORY).conversation_state(session_id, agent_id)
        if state is None:
            return None
        return state.model_copy(
            update={
                "manager_state": self._open_state(session_id, agent_id, "manager_state", state.manager_state),
                "agent_state": self._open_state(session_id, agent_id, "agent_state", state.agent_state),
            }
        )

    def owner(self, session_id: str) -> SessionOwner | None:
        """The inner owner (clear)."""
        return self._inner(SCOPES).owner(session_id)

    # -- apps' and users' state: each value sealed (merges stay key by key), keys clear --------

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The inner state of the app (or user), each value opened."""
        return {
            key: self.sealer.open_json(value, _scope_place(app, user, key))
            if isinstance(value, str) and value.startswith("clenc1.")
            else value
            for key, value in self._inner(SCOPES).scope_state(app, user).items()
        }

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Merge ``delta`` into the inner state, each value sealed."""
        sealed = {key: self.sealer.seal_json(value, _scope_place(app, user, key)) for key, value in delta.items()}
        self._inner(SCOPES).merge_scope_state(app, user, sealed)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Delete the inner state."""
        return self._inner(SCOPES).delete_scope_state(app, user)

    # -- capabilities ---------------------------------------------------------------------

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Lineage is clear: kept by the inner store."""
        return with_lineage(self.inner).add_lineage(links)

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """Lineage of the inner store."""
        return with_lineage(self.inner).lineage(session_id, agent_id)

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Expire in the inner store."""
        return expiring(self.inner).expire_session(session_id, idle_before=idle_before, reason=reason)

    def expirations(self, session_id: str) -> list[Expiry]:
        """Expiries of the inner store."""
        return expiring(self.inner).expirations(session_id)

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """The inner store's erased bytes (see :func:`contextledger.history.lifecycle.settle_erasure`)."""
        from contextledger.history.lifecycle import settle_erasure

        return settle_erasure(self.inner, timeout=timeout, vacuum=vacuum)

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Swap sealed tokens in the inner store (see :mod:`contextledger.history.rotation`)."""
        return resealing(self.inner).reseal(session_id, agent_id, swaps)


def _scope_place(app: str, user: str | None, key: str) -> str:
    """What a value of an app's (or user's) state is bound to."""
    return "\x1f".join(("scope", app, user or "", key))


def _allowing_sealed(fn: F) -> F:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with sealed_values_allowed():
            return fn(*args, **kwargs)

    return call  # type: ignore[return-value]


# Every method reads or writes sealed content through the inner store: let it through
# there (and only there; read without the keys, sealed content is EncryptionKeyMissing).
for _name, _member in list(vars(EncryptedStore).items()):
    if callable(_member) and not _name.startswith("_"):
        setattr(EncryptedStore, _name, _allowing_sealed(_member))
