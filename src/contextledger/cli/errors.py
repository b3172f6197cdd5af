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
from contextledger.stores.urls import mask_text

__all__ = ["ExitCode", "MaskingFormatter", "exit_code_for", "forget_urls", "mask_secrets", "one_line", "remember_url"]


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


_NAMED_URLS: list[str] = []
"""The ledger URLs this command named (``--url``, ``--from``, ``--to``): their credentials are masked everywhere."""


def remember_url(url: str) -> None:
    """Mask the credentials of ``url`` in every error and log line this command prints from now on.

    A driver may echo a password (or a token from the query string) on its own, without
    the URL around it; only knowing the URL finds it.
    """
    if url not in _NAMED_URLS:
        _NAMED_URLS.append(url)


def forget_urls() -> None:
    """Start a new command: forget the URLs the last one named."""
    _NAMED_URLS.clear()


def mask_secrets(text: str, *urls: str | None) -> str:
    """``text`` with every credential masked: of ``urls``, of the URLs the command named, and of any URL in it."""
    return mask_text(text, *urls, *_NAMED_URLS)


class MaskingFormatter(logging.Formatter):
    """A log formatter that masks every credential in the whole record, traceback included."""

    def format(self, record: logging.LogRecord) -> str:
        """Format ``record`` as usual, then mask every credential in the text (see :func:`mask_secrets`)."""
        return mask_secrets(super().format(record))


def one_line(text: str) -> str:
    """Collapse whitespace so a message fits on one line."""
    return " ".join(text.split())
