"""Exit codes of the ``contextledger`` command and the mapping from library errors.

Every error the library raises on purpose becomes one line on stderr and a documented
exit code; only a bug in contextledger itself prints a traceback.
"""

from __future__ import annotations

import logging
from enum import IntEnum

from contextledger.errors import (
    ConfigurationError,
    ContextLedgerError,
    CorruptRecord,
    EntryNotFound,
    SchemaOutOfDate,
    SessionNotFound,
    StoreUnavailable,
)
from contextledger.urls import mask_text

__all__ = ["ExitCode", "MaskingFormatter", "exit_code_for", "mask_secrets", "one_line"]


class ExitCode(IntEnum):
    """Exit codes (also listed in the README and in ``contextledger --help``).

    Attributes:
        OK: Success.
        ERROR: Any other error: a store failure, a declined ``delete``, a failed demo check.
        USAGE: Bad command line (unknown option, invalid value).
        CONFIG: Bad ledger URL or configuration (a missing SQLite file or a backend's
            optional dependency included).
        UNAVAILABLE: The store could not be opened (server unreachable, login refused, database
            missing, or a SQLite file that cannot be created).
        NOT_FOUND: No such session or agent.
        SCHEMA: The database schema is out of date; run ``contextledger db upgrade``.
        CORRUPT: A stored record is damaged (changed outside contextledger); the message
            names the table or key and the id. Other sessions stay readable.
        INTERRUPTED: Interrupted with Ctrl-C.
    """

    OK = 0
    ERROR = 1
    USAGE = 2
    CONFIG = 3
    UNAVAILABLE = 4
    NOT_FOUND = 5
    SCHEMA = 6
    CORRUPT = 7
    INTERRUPTED = 130


def exit_code_for(error: ContextLedgerError) -> ExitCode:
    """The exit code for a library error (the most specific class wins)."""
    if isinstance(error, SchemaOutOfDate):
        return ExitCode.SCHEMA
    if isinstance(error, CorruptRecord):
        return ExitCode.CORRUPT
    if isinstance(error, StoreUnavailable):
        return ExitCode.UNAVAILABLE
    if isinstance(error, SessionNotFound | EntryNotFound):
        return ExitCode.NOT_FOUND
    if isinstance(error, ConfigurationError):
        return ExitCode.CONFIG
    return ExitCode.ERROR


def mask_secrets(text: str, *urls: str | None) -> str:
    """Replace passwords of URLs (in ``text`` and those of ``urls``) with ``***``."""
    return mask_text(text, *urls)


class MaskingFormatter(logging.Formatter):
    """A log formatter that masks URL passwords in the whole record, traceback included."""

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record`` as usual, then mask every password in the text."""
        return mask_text(super().format(record))


def one_line(text: str) -> str:
    """Collapse whitespace so a message fits on one line."""
    return " ".join(text.split())
