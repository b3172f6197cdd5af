"""The error an integration raises when its host's package is not installed."""

from __future__ import annotations

import importlib

from contextledger.errors import ContextLedgerError

__all__ = ["MissingExtra", "require"]


class MissingExtra(ContextLedgerError, ImportError):
    """An integration's host package is not installed; the message is the one line that installs it."""


def require(integration: str, extra: str, *modules: str) -> None:
    """Import ``modules``, or raise :class:`MissingExtra` naming the extra that installs them.

    Raises:
        MissingExtra: A module cannot be imported.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtra(
                f"contextledger.integrations.{integration} needs {module.split('.')[0]}:"
                f" pip install 'contextledger[{extra}]'"
            ) from exc
