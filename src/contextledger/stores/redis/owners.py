"""Apps and users on Redis: who a session belongs to, the sets that list an app's or a user's sessions, and their state.

Who a session belongs to is a small hash beside the session's agent set (the same hash
slot), claimed by :data:`CLAIM` -- one script, so two writers creating the same session
for different owners cannot both win -- before the commit that creates the session's
first conversation. That commit and the claim are two round trips (the conversation
lives in another slot on Cluster), and only the creation of a conversation pays the
extra one. The sets that list an app's and a user's sessions are written right after a
successful claim; like the other indexes of the store they are never the source of
truth: a session listed there is checked against its owner hash and its conversations
when read, so a creation that failed, or a session that expired, is skipped.

An app's and a user's state are hashes of their own, one field per key (JSON text): a
merge is one ``HSET``, atomic on one server and on Cluster alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from contextledger.core.changeset import Changeset
from contextledger.errors import CorruptRecord
from contextledger.model.records import SessionOwner
from contextledger.stores.base import check_owner
from contextledger.stores.redis.codec import text
from contextledger.stores.redis.connect import RedisClient
from contextledger.stores.redis.keys import SessionKeys

__all__ = ["CLAIM", "check_claim", "claim_args", "index_sets", "read_owners", "scope_state"]

CLAIM = r"""#!lua
-- Claim a session for an app and a user, before the commit creating a conversation in it.
-- KEYS: owner agents   ARGV: app user ('' = not named)
-- A session that has an owner hash keeps it; one that has conversations but no owner
-- hash belongs to nobody; only a new session takes the claim.
-- Returns {app, user} the session belongs to ('' = none).
local app = redis.call('HGET', KEYS[1], 'app')
local user = redis.call('HGET', KEYS[1], 'user')
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('SCARD', KEYS[2]) == 0 then
  if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'app', ARGV[1]) end
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'user', ARGV[2]) end
  return {ARGV[1], ARGV[2]}
end
return {app or '', user or ''}
"""


def claim_args(cs: Changeset) -> list[str]:
    """The ARGV of :data:`CLAIM` for a changeset creating a conversation."""
    return [cs.app or "", cs.user or ""]


def check_claim(cs: Changeset, reply: Any) -> SessionOwner:
    """The owner :data:`CLAIM` answered, checked against what ``cs`` names.

    Raises:
        SessionOwnerConflict: The session belongs to another app or user.
    """
    app, user = (text(v) for v in cast(list[bytes], reply))
    stored = SessionOwner(app or None, user or None)
    check_owner(cs.session_id, stored, cs)
    return stored


def index_sets(prefix: str, owner: SessionOwner) -> list[str]:
    """The sets a session of ``owner`` is listed in (none when it names neither app nor user)."""
    sets = []
    if owner.app is not None:
        sets.append(SessionKeys.owned(prefix, owner.app, None))
    if owner.user is not None:
        sets.append(SessionKeys.owned(prefix, None, owner.user))
    if owner.app is not None and owner.user is not None:
        sets.append(SessionKeys.owned(prefix, owner.app, owner.user))
    return sets


def read_owners(client: RedisClient, prefix: str, session_ids: Sequence[str]) -> list[SessionOwner]:
    """The owner of each session (``(None, None)`` when none was named), one pipeline."""
    pipe = client.pipeline(transaction=False)
    for sid in session_ids:
        pipe.hmget(SessionKeys.of(prefix, sid).owner, ["app", "user"])
    return [
        SessionOwner(None if app is None else text(app), None if user is None else text(user))
        for app, user in pipe.execute()
    ]


def scope_state(raw: Mapping[bytes, bytes], key: str) -> dict[str, Any]:
    """The state hash of an app or a user, decoded.

    Raises:
        CorruptRecord: A value is not JSON.
    """
    out: dict[str, Any] = {}
    for field, value in raw.items():
        name = text(field)
        try:
            out[name] = json.loads(value)
        except ValueError as exc:
            raise CorruptRecord(f"undecodable stored value: {exc}", where=key, record_id=name) from exc
    return out
