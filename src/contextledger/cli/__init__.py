"""The ``contextledger`` command line: ``demo``, the ledger inspector and ``db`` migrations.

Exit codes are documented in :class:`contextledger.cli.errors.ExitCode`.
"""

from __future__ import annotations

from contextledger.cli.app import app
from contextledger.cli.errors import ExitCode

__all__ = ["ExitCode", "app", "main"]


def main() -> None:
    """Run the command line (the ``contextledger`` console script)."""
    app(prog_name="contextledger")
