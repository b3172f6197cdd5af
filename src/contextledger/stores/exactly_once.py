"""Exactly-once commits: a commit whose reply is lost is resolved by reading its id back.

Every :class:`~contextledger.core.changeset.Changeset` carries a client-generated
``changeset_id``, and every store records, atomically with what a changeset wrote, which
changeset produced which version of the conversation (its commit log). When the
connection drops after a commit was sent, the server may or may not have applied it.
:func:`commit_exactly_once` then asks the store which: the log entry of version
``expected_version + 1`` holds this changeset's id (applied: return that version), or
the conversation is still at ``expected_version`` (not applied: send it once more), or
another writer moved it on (not applied: ``ConcurrencyConflict``).

Sending the same changeset again is safe because every store checks the log as part of
its version check: a changeset that already applied returns its version instead of
conflicting. That also covers a driver that re-sends a request on its own after a
reconnect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from contextledger.core.changeset import Changeset
from contextledger.errors import CommitOutcomeUnknown, StoreUnavailable
from contextledger.telemetry.notes import reply_lost

__all__ = ["ReplyLost", "commit_exactly_once"]

logger = logging.getLogger(__name__)


class ReplyLost(Exception):
    """Raised by a store's send step: the request may have reached the server, no reply came back.

    Internal to the stores: :func:`commit_exactly_once` turns it into a resolved outcome
    or a :class:`~contextledger.errors.StoreUnavailable`; callers never see it.

    Attributes:
        error: The library error the driver failure translates to.
    """

    def __init__(self, error: StoreUnavailable) -> None:
        super().__init__(str(error))
        self.error = error


def commit_exactly_once(
    changeset: Changeset,
    send: Callable[[Changeset], int],
    read_back: Callable[[Changeset], int | None],
) -> int:
    """Commit ``changeset`` with ``send``; resolve a lost reply with ``read_back``.

    Args:
        changeset: What to commit.
        send: Applies the changeset and returns the new version; raises :class:`ReplyLost`
            when the outcome is unknown (any other error means nothing was applied).
        read_back: Returns the version ``changeset`` produced if it applied, ``None`` if it
            did not and the conversation is still at its expected version; raises
            ``ConcurrencyConflict`` / ``SessionDeleted`` when it did not and the conversation
            moved on or is gone, ``StoreUnavailable`` when it cannot tell.

    Returns:
        The new version: the changeset applied exactly once.

    Raises:
        StoreUnavailable: The changeset was sent twice, both replies were lost, and reading
            back found it not applied (nothing was applied).
        CommitOutcomeUnknown: A reply was lost and the server stayed unreachable, so the
            outcome could not be read back (applied at most once).
    """
    lost: ReplyLost | None = None
    for attempt in (1, 2):
        try:
            return send(changeset)
        except ReplyLost as exc:
            lost = exc
        try:
            version = read_back(changeset)
        except StoreUnavailable as exc:
            raise CommitOutcomeUnknown(
                f"the reply to changeset {changeset.changeset_id} was lost and its outcome could not be read back "
                f"({exc}); it was applied at most once -- re-read the conversation",
                changeset.changeset_id,
            ) from lost.error
        reply_lost(applied=version is not None)
        if version is not None:
            logger.info(
                "session_id=<%s>, agent_id=<%s>, changeset_id=<%s>, version=<%d> | reply lost, changeset applied",
                changeset.session_id,
                changeset.agent_id,
                changeset.changeset_id,
                version,
            )
            return version
        logger.info(
            "session_id=<%s>, agent_id=<%s>, changeset_id=<%s>, attempt=<%d> | reply lost, changeset not applied",
            changeset.session_id,
            changeset.agent_id,
            changeset.changeset_id,
            attempt,
        )
    assert lost is not None
    raise StoreUnavailable(
        f"changeset {changeset.changeset_id} could not be committed: the reply was lost twice and it was not "
        f"applied ({lost.error})"
    ) from lost.error
