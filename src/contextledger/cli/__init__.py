"""The ``contextledger`` command line: ``demo``, the ledger inspector, the web view and ``db`` migrations.

Exit codes are documented in :class:`contextledger.cli.errors.ExitCode`.
"""

from __future__ import annotations

import sys

from contextledger.cli.app import app
from contextledger.cli.errors import ExitCode

__all__ = ["ExitCode", "app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: the process's arguments).

    Ctrl-C anywhere exits 130 without a traceback.
    """
    try:
        app(args=sys.argv[1:] if argv is None else argv, prog_name="contextledger")
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        raise SystemExit(ExitCode.INTERRUPTED) from None
