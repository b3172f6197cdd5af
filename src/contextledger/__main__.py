"""The ``contextledger`` console script and ``python -m contextledger``.

``contextledger --version`` answers from the package metadata without importing the
command line (typer, rich) or the library's models and stores.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def main() -> None:
    """Run the command line; Ctrl-C anywhere, imports included, exits 130."""
    try:
        if sys.argv[1:] == ["--version"]:
            from contextledger import __version__

            sys.stdout.write(f"contextledger {__version__}\n")
            return
        from contextledger.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        raise SystemExit(INTERRUPTED) from None


if __name__ == "__main__":
    main()
