"""The ``contextledger`` command: the demo, the inspector and schema migrations."""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from contextledger import __version__
from contextledger.cli import db, entries, importer, inspector, server
from contextledger.cli import lifecycle as lifecycle_cli
from contextledger.cli import travel as travel_cli
from contextledger.cli.demo import demo as demo_command
from contextledger.cli.errors import ExitCode, MaskingFormatter, exit_code_for, mask_secrets, one_line
from contextledger.errors import ContextLedgerError

__all__ = ["app"]

logger = logging.getLogger(__name__)

EXIT_CODES_HELP = (
    "Exit codes: 0 ok · 1 error (store failure, declined delete, failed demo check) · 2 usage · "
    "3 bad ledger URL or configuration · 4 server unreachable · 5 session or agent not found · "
    "6 schema out of date (run `contextledger db upgrade`) · 7 damaged record · 130 interrupted."
)


class LedgerGroup(TyperGroup):
    """Turns library errors into one line on stderr and a documented exit code."""

    def invoke(self, ctx: Any) -> Any:
        """Run the command; map :class:`ContextLedgerError` to :class:`ExitCode`, Ctrl-C to 130."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            typer.echo("\ninterrupted", err=True)
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except ContextLedgerError as exc:
            code = exit_code_for(exc)
            logger.debug("exit_code=<%d> | command failed", code, exc_info=exc)
            typer.echo(f"error: {one_line(mask_secrets(str(exc) or type(exc).__name__))}", err=True)
            raise typer.Exit(code) from None


app = typer.Typer(
    cls=LedgerGroup,
    name="contextledger",
    help="Conversation state of LLM agents in a real database: run the demo, inspect any ledger, migrate its schema.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"contextledger {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[
        int,
        typer.Option("--verbose", "-v", count=True, help="Log the library's structured lines to stderr (-vv: debug)."),
    ] = 0,
) -> None:
    """Conversation state of LLM agents in a real database."""
    _configure_logging(verbose)


class _CliLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``--verbose`` installs (replaced, never stacked, on each invocation)."""


def _configure_logging(verbose: int) -> None:
    package = logging.getLogger("contextledger")
    for handler in [h for h in package.handlers if isinstance(h, _CliLogHandler)]:
        package.removeHandler(handler)
        package.setLevel(logging.NOTSET)
    if not verbose:
        return
    handler = _CliLogHandler(sys.stderr)
    handler.setFormatter(MaskingFormatter("%(levelname)s %(name)s: %(message)s"))
    package.addHandler(handler)
    package.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


app.command("demo", epilog=EXIT_CODES_HELP)(demo_command)
for _command in (
    inspector.sessions,
    travel_cli.show,
    inspector.history,
    inspector.evictions,
    inspector.summaries,
    inspector.reductions,
    entries.revisions,
    entries.pins,
    entries.message,
    inspector.export,
    inspector.delete,
    server.serve,
    server.timeline,
    lifecycle_cli.prune,
):
    app.command(_command.__name__, epilog=EXIT_CODES_HELP)(_command)

db_app = typer.Typer(
    cls=LedgerGroup,
    name="db",
    help="Schema migrations of a SQL ledger.",
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
)
db_app.command("upgrade")(db.upgrade)
db_app.command("current")(db.current)
app.add_typer(db_app)

import_app = typer.Typer(
    cls=LedgerGroup,
    name="import",
    help="Import sessions written by other tools (writes to the ledger; never deletes; idempotent).",
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
)
import_app.command("strands")(importer.strands)
app.add_typer(import_app)
