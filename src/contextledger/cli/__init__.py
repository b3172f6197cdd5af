"""The ``contextledger`` command line: ``demo``, the ledger inspector, the web view and ``db`` migrations.

Exit codes are documented in :class:`contextledger.cli.errors.ExitCode`.

The command's modules (typer, rich, the stores) are imported only when a command needs
them: ``contextledger --version`` answers without importing any of them.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextledger.cli.app import app
    from contextledger.cli.errors import ExitCode

__all__ = ["ExitCode", "app", "main"]

INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def __getattr__(name: str) -> Any:
    if name == "app":
        from contextledger.cli.app import app

        return app
    if name == "ExitCode":
        from contextledger.cli.errors import ExitCode

        return ExitCode
    raise AttributeError(f"module 'contextledger.cli' has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Run the command line (the ``contextledger`` console script and ``python -m contextledger``).

    Ctrl-C anywhere -- while importing, opening a ledger, paging -- exits 130 without a traceback.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["--version"]:
            from contextledger import __version__

            sys.stdout.write(f"contextledger {__version__}\n")
            return
        from contextledger.cli.app import app

        app(args=args, prog_name="contextledger")
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        raise SystemExit(INTERRUPTED) from None
