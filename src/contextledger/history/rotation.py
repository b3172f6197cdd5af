"""Key rotation: re-seal every value of an encrypted ledger under the current key, in bounded batches.

Run it (``contextledger encryption rotate``) with a keyring whose first key is the new
one and that still holds the old ones. For each conversation it reads the sealed values
as they are stored, opens each one sealed with another key and seals it again with the
current key, and replaces the tokens in batches of at most ``batch_size`` values, each
batch one atomic step of the store (:meth:`~contextledger.stores.capabilities.ResealingStore.reseal`),
which replaces a token only where it still is -- so the ledger stays in use meanwhile,
and a value rewritten or erased since it was read is simply left to that write.

Resumable: nothing but the tokens changes, and a token already under the current key is
never touched again, so a rotation stopped anywhere (a crash, Ctrl-C) is finished by
running it again. Once a run reports no value left, the old keys can be dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from contextledger.encryption import SEALED, key_id_of, sealed_token
from contextledger.errors import ConfigurationError
from contextledger.history.transfer import list_sessions
from contextledger.model.stored import sealed_values_allowed
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import HISTORY, Swap, resealing
from contextledger.stores.encrypted import EncryptedStore
from contextledger.stores.sealing import place

__all__ = ["CLEAR", "DEFAULT_BATCH", "Rotation", "key_census", "rotate", "stale_swaps"]

CLEAR = "(not sealed)"
"""How :func:`key_census` counts a value written before the ledger was encrypted."""

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 200
"""Values re-sealed per atomic step."""


@dataclass(frozen=True)
class Rotation:
    """What :func:`rotate` did.

    Attributes:
        key_id: The key everything was re-sealed with.
        conversations: Conversations looked at.
        resealed: Values re-sealed.
        skipped: Values changed meanwhile (their new value is already sealed with the current key).
    """

    key_id: str
    conversations: int
    resealed: int
    skipped: int


def stale_swaps(store: EncryptedStore, session_id: str, agent_id: str) -> Iterator[Swap]:
    """The swaps that bring every sealed value of one conversation under the current key."""
    sealer = store.sealer
    current, _ = sealer.keys.current()
    inner: LedgerStore = store.inner
    sid, aid = session_id, agent_id

    def swap(where: str, ident: str, token: str | None, at: str, number: int = 0) -> Swap | None:
        if token is None or key_id_of(token) in (None, current):
            return None
        new = sealer.seal_text(sealer.open_text(token, at), at)
        return Swap(where=where, ident=ident, old=token, new=new, number=number)  # type: ignore[arg-type]

    found: list[Swap | None] = []
    with sealed_values_allowed():
        found += _read_swaps(inner, sid, aid, swap)
    yield from (s for s in found if s is not None)


def _read_swaps(inner: LedgerStore, sid: str, aid: str, swap: Callable[..., Swap | None]) -> list[Swap | None]:
    found: list[Swap | None] = []
    for h in HISTORY.of(inner, "key rotation").history(sid, aid):
        mid = h.message.message_id
        found.append(swap("content", mid, sealed_token(h.message.content), place(sid, aid, "content", mid)))
        meta = h.message.metadata.get(SEALED)
        found.append(swap("meta", mid, meta if isinstance(meta, str) else None, place(sid, aid, "meta", mid)))
    for s in HISTORY.of(inner, "key rotation").summaries(sid, aid):
        found.append(swap("summary", s.summary_id, s.content, place(sid, aid, "summary", s.summary_id)))
    for r in HISTORY.of(inner, "key rotation").revisions(sid, aid):
        at = place(sid, aid, "content", r.message_id)
        found.append(swap("revision", r.message_id, sealed_token(r.original), at, r.number))
    snapshot = inner.load(sid, aid)
    if snapshot is not None:
        for which in ("manager_state", "agent_state"):
            value = getattr(snapshot.state, which)
            token = value.get(SEALED) if isinstance(value, dict) else None
            found.append(swap(which, "", token if isinstance(token, str) else None, place(sid, aid, which)))
    return found


def rotate(
    store: LedgerStore,
    *,
    batch_size: int = DEFAULT_BATCH,
    session_ids: Sequence[str] | None = None,
    on_conversation: Callable[[str, str, int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> Rotation:
    """Re-seal every value not sealed with the current key; see the module docstring.

    Args:
        store: An encrypted ledger's store (``Ledger.connect(url, encryption=keyring).store``).
        batch_size: Values per atomic step (at least 1).
        session_ids: Only these sessions (default: all).
        on_conversation: Called after each conversation with its ids and how many values it re-sealed.
        on_batch: Called after each batch with how many values it re-sealed.

    Raises:
        ConfigurationError: ``store`` is not encrypted, or ``batch_size`` is below 1.
        EncryptionKeyMissing: A value is sealed with a key the keyring does not hold.
        EncryptionError: A value does not open with its key.
    """
    if not isinstance(store, EncryptedStore):
        raise ConfigurationError("rotate needs an encrypted ledger: Ledger.connect(url, encryption=keyring)")
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
    resealing(store.inner)  # refuses a store that cannot before anything is read
    key_id, _ = store.sealer.keys.current()
    conversations = resealed = skipped = 0
    for sid in list(session_ids) if session_ids is not None else list_sessions(store):
        for aid in HISTORY.of(store, "key rotation").agents(sid):
            swaps = list(stale_swaps(store, sid, aid))
            done = 0
            for start in range(0, len(swaps), batch_size):
                batch = swaps[start : start + batch_size]
                applied = store.reseal(sid, aid, batch)
                done += applied
                skipped += len(batch) - applied
                if on_batch is not None:
                    on_batch(applied)
            conversations += 1
            resealed += done
            if on_conversation is not None:
                on_conversation(sid, aid, done)
            if swaps:
                logger.info(
                    "session_id=<%s>, agent_id=<%s>, resealed=<%d>, key_id=<%s> | rotated", sid, aid, done, key_id
                )
    if resealed:
        from contextledger.history.erasure import settle_erasure

        settle_erasure(store)  # the old tokens leave the files as erased bytes do
    return Rotation(key_id=key_id, conversations=conversations, resealed=resealed, skipped=skipped)


def key_census(store: LedgerStore, session_id: str) -> dict[str, int]:
    """How many values of the session each key seals (``CLEAR``: not sealed), as stored."""
    inner = store.inner if isinstance(store, EncryptedStore) else store
    with sealed_values_allowed():
        return _census(inner, session_id)


def _census(inner: LedgerStore, session_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}

    def count(token: object) -> None:
        key_id = key_id_of(token) if isinstance(token, str) else None
        counts[key_id or CLEAR] = counts.get(key_id or CLEAR, 0) + 1

    for aid in HISTORY.of(inner, "key rotation").agents(session_id):
        for h in HISTORY.of(inner, "key rotation").history(session_id, aid):
            count(sealed_token(h.message.content))
        for s in HISTORY.of(inner, "key rotation").summaries(session_id, aid):
            count(s.content)
        for r in HISTORY.of(inner, "key rotation").revisions(session_id, aid):
            count(sealed_token(r.original))
        snapshot = inner.load(session_id, aid)
        if snapshot is not None:
            for value in (snapshot.state.manager_state, snapshot.state.agent_state):
                if value is not None:
                    count(value.get(SEALED))
    return counts
