"""The library's one rooted error hierarchy.

Every error raised by contextledger derives from :class:`ContextLedgerError`. Backend
errors (SQLAlchemy, redis-py, psycopg) are translated into these at the store boundary
with ``raise ... from exc`` so callers never need to import a driver to handle them.
"""

from __future__ import annotations

__all__ = [
    "CapabilityMissing",
    "CommitOutcomeUnknown",
    "ConcurrencyConflict",
    "ConfigurationError",
    "ContextLedgerError",
    "ContextWindowOverflowError",
    "ConversationExists",
    "CorruptRecord",
    "DuplicateEntry",
    "EncryptionError",
    "EncryptionKeyMissing",
    "EntryNotFound",
    "ErasurePending",
    "InvalidExport",
    "InvalidLedgerURL",
    "InvalidMessage",
    "InvalidPage",
    "InvalidPlan",
    "LedgerClosed",
    "MissingDependency",
    "ModelCallNotFound",
    "NotALedger",
    "PinError",
    "ReductionFailed",
    "ReductionNotFound",
    "SchemaOutOfDate",
    "SessionDeleted",
    "SessionExists",
    "SessionExpired",
    "SessionNotFound",
    "SessionOwnerConflict",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "UndoConflict",
]


class ContextLedgerError(Exception):
    """Root of every error raised by contextledger."""


class ConfigurationError(ContextLedgerError, ValueError):
    """A manager, ledger or integration was configured with invalid options."""


class CapabilityMissing(ConfigurationError):
    """A feature needs a store capability the store does not declare (a listing, erasure, lineage...).

    Raised before anything is read or written, naming what is missing and where, so a
    small store fails clearly instead of with an ``AttributeError`` halfway through.

    Attributes:
        capability: The capability's name (see :mod:`contextledger.stores.capabilities`).
        store: The store's type name.
        feature: What needed it (e.g. ``"Ledger.history"``).
    """

    def __init__(self, capability: str, store: str, feature: str) -> None:
        self.capability = capability
        self.store = store
        self.feature = feature
        super().__init__(f"{feature} needs the {capability!r} capability, which the store {store} does not declare")


class InvalidPage(ConfigurationError):
    """A listing was asked for a page it cannot serve: a bad cursor, or a bad or conflicting limit."""


class InvalidMessage(ContextLedgerError, ValueError):
    """A message or content block does not have the shape the ledger accepts.

    Also raised, before anything is written, for a message, revision or host state value
    that cannot be stored as JSON (e.g. a set, an arbitrary object, NaN).
    """


class MissingDependency(ContextLedgerError, ImportError):
    """An integration needs an optional package that is not installed; the message names the extra to install."""


class InvalidLedgerURL(ConfigurationError):
    """A ledger URL names no supported backend or is malformed."""


class NotALedger(InvalidLedgerURL):
    """The URL names a database that holds no contextledger ledger (another application's file)."""


class StoreError(ContextLedgerError):
    """A storage backend failed; the original driver error is chained as ``__cause__``."""


class CorruptRecord(StoreError):
    """A stored value cannot be decoded: it was damaged or changed outside contextledger.

    Only the conversation (or the record) holding it is affected; the others stay
    readable.

    Attributes:
        where: The table or key that holds the damaged value (``None`` when unknown).
        record_id: The id of the damaged row or entry (``None`` when unknown).
    """

    def __init__(self, message: str, *, where: str | None = None, record_id: str | None = None) -> None:
        self.where = where
        self.record_id = record_id
        self.detail = message
        located = f" ({where}" + (f", id {record_id!r}" if record_id is not None else "") + ")" if where else ""
        super().__init__(f"corrupt record{located}: {message}")

    def located(self, where: str, record_id: str | None = None) -> CorruptRecord:
        """This error with its location filled in (an inner decoder does not know it)."""
        if self.where is not None:
            return self
        error = CorruptRecord(self.detail, where=where, record_id=record_id)
        error.__cause__ = self.__cause__ or self
        return error


class DuplicateEntry(StoreError):
    """A changeset appends an entry id that the conversation already holds."""


class StoreUnavailable(StoreError):
    """The storage server could not be reached."""


class StoreTimeout(StoreError):
    """A statement waited longer than the store allows (a lock held elsewhere, a slow query).

    On PostgreSQL the ledger sets ``lock_timeout`` and ``statement_timeout`` on every
    connection (see ``SQLStore.from_url``); the transaction is rolled back, so nothing
    of the changeset was applied and the call can be retried.
    """


class CommitOutcomeUnknown(StoreUnavailable):
    """The reply to a commit was lost and the store could not read back whether it applied.

    Raised only when the server stays unreachable while the store tries to resolve the
    outcome. The changeset was applied at most once: the next commit of the conversation
    (its version check) settles it, and a fresh read shows which.

    Attributes:
        changeset_id: The id of the changeset whose outcome is unknown.
    """

    def __init__(self, message: str, changeset_id: str) -> None:
        self.changeset_id = changeset_id
        super().__init__(message)


class LedgerClosed(StoreError):
    """The ledger (or store) was closed; it never reconnects. Open a new one."""


class SchemaOutOfDate(StoreError):
    """The database schema is behind or ahead of this version of the library.

    Attributes:
        current: The revision found in the database (``None`` when the schema is absent).
        expected: The revision this library needs.
        command: The command that fixes it.
    """

    def __init__(self, current: str | None, expected: str | None, command: str) -> None:
        self.current = current
        self.expected = expected
        self.command = command
        if command.startswith("pip "):  # the schema is newer than this library: db upgrade cannot help
            advice = (
                f"the database was migrated by a newer contextledger: upgrade the contextledger package (`{command}`)"
            )
        else:
            advice = f"run `{command}`"
        super().__init__(
            f"ledger schema is at revision {current or '<none>'} but this version of "
            f"contextledger needs {expected or '<none>'}; {advice}"
        )


class ConcurrencyConflict(StoreError):
    """A changeset was planned on a version that is no longer current.

    The :class:`~contextledger.Conversation` re-reads, re-plans and retries a bounded
    number of times before letting this propagate.
    """


class SessionNotFound(ContextLedgerError, LookupError):
    """No conversation exists for the requested session (and agent)."""


class SessionDeleted(SessionNotFound):
    """The conversation was deleted while this writer held it.

    Raised by a commit planned on a version > 0 that finds no conversation: the writer's
    view belongs to a session that no longer exists, and is not silently re-created.
    """


class SessionExpired(SessionDeleted):
    """The conversation expired while this writer held it (a Redis ``ttl``, or ``Ledger.expire``).

    It is gone for good, as a deleted one is: open it again with
    ``ledger.conversation(session_id, agent_id)`` to start afresh.
    """


class ErasurePending(ContextLedgerError):
    """An erasure is done in the ledger, but erased bytes may still be on disk, or copies remain elsewhere.

    Raised by :meth:`~contextledger.history.lifecycle.Erasure.raise_if_incomplete` (the erase
    itself returns its report): the message says what is left and what to do, e.g. a
    SQLite WAL held by another process's read transaction (run
    ``ledger.settle_erasure()`` once it ends) or a copy in another ledger.

    Attributes:
        erasure: The report (a :class:`~contextledger.history.lifecycle.Erasure`).
    """

    def __init__(self, message: str, *, erasure: object) -> None:
        """Carry the report."""
        super().__init__(message)
        self.erasure = erasure


class EncryptionError(ContextLedgerError):
    """A stored value could not be decrypted or encrypted: a wrong key, or a damaged ciphertext.

    Nothing is returned in its place: the ledger never hands out undecrypted bytes.
    """


class EncryptionKeyMissing(EncryptionError):
    """The key a value was encrypted under is not among the keys given (or no key was given).

    Attributes:
        key_id: The id of the key that is needed (``None`` when no key at all was given).
    """

    def __init__(self, message: str, *, key_id: str | None = None) -> None:
        """Carry the key id."""
        super().__init__(message)
        self.key_id = key_id


class EntryNotFound(ContextLedgerError, LookupError):
    """No active entry has the requested id."""


class PinError(ContextLedgerError, ValueError):
    """A pin or unpin request named an entry that cannot be pinned (or an index out of range)."""


class ContextWindowOverflowError(ContextLedgerError):
    """The model rejected the input because it exceeds the context window.

    Hosts raise (or map their own error to) this so that managers can reduce reactively.
    """


class InvalidPlan(ContextLedgerError, ValueError):
    """A reduction plan would leave a view a provider rejects, and cannot be corrected safely.

    Raised for a custom manager's plan (the built-in managers never make one), before
    anything is written. See "view rules" in the README.
    """


class ReductionFailed(ContextWindowOverflowError):
    """A reactive reduction was required but nothing could be reduced any further."""


class ReductionNotFound(EntryNotFound):
    """No reduction of the conversation has the requested id."""


class ModelCallNotFound(ContextLedgerError, LookupError):
    """The conversation made no model call with the requested number (calls count from 1)."""


class UndoConflict(ContextLedgerError):
    """A reduction cannot be undone alone: later reductions depend on what it produced.

    Undo those first, or pass ``cascade=True`` to revert them in the same commit.

    Attributes:
        dependents: The ids of the later reductions that depend on it, oldest first.
    """

    def __init__(self, message: str, *, dependents: tuple[str, ...] = ()) -> None:
        """Carry the dependents' ids."""
        super().__init__(message)
        self.dependents = dependents


class SessionOwnerConflict(ContextLedgerError, ValueError):
    """A conversation was created in a session that belongs to another app or user.

    The app and user of a session are set by the commit that creates it and never change;
    a conversation added to it later must name the same ones (or none).
    """


class SessionExists(ContextLedgerError, ValueError):
    """The session named as new (a fork's target, an import's) already has a conversation."""


class ConversationExists(SessionExists):
    """An import or copy found its target conversation holding different records.

    Importing the same records again is not an error (it changes nothing); this is
    raised only when what is stored differs, and nothing is written.
    """


class InvalidExport(ContextLedgerError, ValueError):
    """An export file (or a conversation's records) cannot be loaded: malformed or inconsistent.

    Raised before anything is written. The message names the line of the file (and the
    field) when the records came from one.

    Attributes:
        line: The line of the export file (counting from 1), when known.
        field: The field of the record at fault (``seq``, ``evicted_by``...), when known.
        record: The record at fault, when known (to find its line).
    """

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None, record: object = None):
        self.detail = message
        self.line = line
        self.field = field
        self.record = record
        super().__init__(message if line is None else f"line {line}: {message}")
