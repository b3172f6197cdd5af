"""The ``contextledger`` command: the demo, the inspector and schema migrations.

Commands are listed in one table, :data:`COMMANDS` (name -> ``module:function``, or a
:class:`Subcommands` group of such entries); a command's module is imported only when
that command runs, or when ``--help`` or shell completion needs its options. So
``contextledger history`` never imports the web server, the demo or the migrations.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from contextledger.cli.errors import ExitCode, MaskingFormatter, exit_code_for, forget_urls, mask_secrets, one_line
from contextledger.errors import ContextLedgerError

__all__ = ["COMMANDS", "Subcommands", "app"]

logger = logging.getLogger(__name__)

EXIT_CODES_HELP = (
    "Exit codes: 0 ok · 1 error (store failure, declined delete, failed demo check) · 2 usage · "
    "3 bad ledger URL or configuration · 4 server unreachable · 5 session or agent not found · "
    "6 schema out of date (run `contextledger db upgrade`) · 7 damaged record · 130 interrupted."
)


@dataclass(frozen=True)
class Subcommands:
    """A group of commands (``contextledger db ...``): its help and its own table of commands."""

    help: str
    commands: Mapping[str, str]
    default: str | None = None
    """The command that runs when the first argument names none (``import FILE`` is ``import file FILE``)."""


COMMANDS: Mapping[str, str | Subcommands] = {
    # name -> "module:function" (imported when the command runs), in the order --help lists them
    "demo": "contextledger.cli.demo:demo",
    "sessions": "contextledger.cli.inspector:sessions",
    "show": "contextledger.cli.travel:show",
    "history": "contextledger.cli.inspector:history",
    "evictions": "contextledger.cli.inspector:evictions",
    "summaries": "contextledger.cli.inspector:summaries",
    "reductions": "contextledger.cli.inspector:reductions",
    "revisions": "contextledger.cli.entries:revisions",
    "pins": "contextledger.cli.entries:pins",
    "message": "contextledger.cli.entries:message",
    "export": "contextledger.cli.inspector:export",
    "delete": "contextledger.cli.inspector:delete",
    "serve": "contextledger.cli.server:serve",
    "timeline": "contextledger.cli.server:timeline",
    "tail": "contextledger.cli.tail:tail",
    "prune": "contextledger.cli.lifecycle:prune",
    "copy": "contextledger.cli.copy:copy",
    "encryption": Subcommands(
        "Encryption at rest: a new key, key rotation, what each key seals "
        "(keys in CONTEXTLEDGER_ENCRYPTION_KEYS, the current one first).",
        {
            "new-key": "contextledger.cli.encryption:new_key",
            "rotate": "contextledger.cli.encryption:rotate",
            "status": "contextledger.cli.encryption:status",
        },
    ),
    "db": Subcommands(
        "Schema migrations of a SQL ledger.",
        {
            "upgrade": "contextledger.cli.db:upgrade",
            "current": "contextledger.cli.db:current",
            "partition": "contextledger.cli.db:partition",
        },
    ),
    "import": Subcommands(
        "Load sessions into a ledger (writes; never deletes; importing twice changes nothing).\n\n"
        "contextledger import FILE --url URL loads a `contextledger export` back exactly (ids, times, versions, "
        "summaries, pins, tombstones); FILE may be - for stdin.\n\n"
        "contextledger import strands DIR --url URL imports Strands FileSessionManager sessions.\n\n"
        "contextledger import adk DB_URL --url URL imports ADK DatabaseSessionService sessions.",
        {
            "file": "contextledger.cli.importer:export_file",
            "strands": "contextledger.cli.importer:strands",
            "adk": "contextledger.cli.import_adk:adk",
        },
        default="file",
    ),
}
"""Every command of ``contextledger``; add a command here (and nowhere else)."""


class LazyCommands(MutableMapping[str, Any]):
    """A group's commands, built from a table the first time each is looked up.

    Listing the names (``--help`` headings, suggestions for a typo, completion) imports
    nothing; looking a command up imports its module and builds its click command once.
    """

    def __init__(self, table: Mapping[str, str | Subcommands], group: TyperGroup) -> None:
        """Serve ``table``'s entries for ``group`` (whose settings the built commands share)."""
        self._table = table
        self._group = group
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        """The click command ``name``, built on first use.

        Raises:
            KeyError: No such command.
        """
        if name not in self._built:
            self._built[name] = self._build(name, self._table[name])
        return self._built[name]

    def _build(self, name: str, entry: str | Subcommands) -> Any:
        if isinstance(entry, Subcommands):
            return LedgerGroup(
                name=name,
                help=entry.help,
                epilog=EXIT_CODES_HELP,
                no_args_is_help=True,
                rich_markup_mode=self._group.rich_markup_mode,
                commands=entry.commands,
                default_command=entry.default,
            )
        module, _, function = entry.partition(":")
        callback = getattr(importlib.import_module(module), function)
        info = typer.models.CommandInfo(name=name, callback=callback, epilog=EXIT_CODES_HELP)
        return typer.main.get_command_from_info(
            info, pretty_exceptions_short=True, rich_markup_mode=self._group.rich_markup_mode
        )

    def __setitem__(self, name: str, command: Any) -> None:
        """Add a command built elsewhere (``add_command``)."""
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        """Remove a command (from the built ones; a table entry cannot be removed)."""
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        """The names: the table's, in its order, then any added ones."""
        yield from self._table
        yield from (name for name in self._built if name not in self._table)

    def __len__(self) -> int:
        """How many commands there are."""
        return len(set(self._table) | set(self._built))

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a command (without building it)."""
        return name in self._table or name in self._built


class LedgerGroup(TyperGroup):
    """A group whose commands come from a table, imported lazily; library errors become one line and an exit code.

    ``commands`` may be a table of ``name -> "module:function"`` entries (and
    :class:`Subcommands`) instead of built click commands; a subclass may set :attr:`table`.
    """

    table: Mapping[str, str | Subcommands] = {}

    def __init__(self, *, commands: Any = None, default_command: str | None = None, **attrs: Any) -> None:
        """A group serving ``commands`` (a table, or built commands) and the class's :attr:`table`.

        ``default_command`` runs when the first argument names no command (it is then
        that command's first argument).
        """
        self.default_command = default_command
        table: Mapping[str, str | Subcommands] = self.table
        built: dict[str, Any] = {}
        if (
            isinstance(commands, Mapping)
            and commands
            and all(isinstance(v, str | Subcommands) for v in commands.values())
        ):
            table = commands
        elif commands:
            built = dict(commands) if isinstance(commands, Mapping) else {c.name: c for c in commands}
        super().__init__(**attrs)
        self.commands = LazyCommands(table, self)
        self.commands.update(built)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        """Resolve a command; with a :attr:`default_command`, a first argument naming none is its argument."""
        first = args[0] if args else None
        unnamed = first is not None and first not in self.commands and (first == "-" or not first.startswith("-"))
        if self.default_command and unnamed:
            args = [self.default_command, *args]
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands' names in the table's order, without importing any (typer's lists its items)."""
        return list(self.commands)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; map :class:`ContextLedgerError` to :class:`ExitCode`, Ctrl-C to 130."""
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            # Values are checked by pydantic, whose messages start "Value error, ": the option
            # named in front ("Invalid value for --since: ...") says all the prefix would.
            exc.message = exc.message.removeprefix("Value error, ")
            raise
        except KeyboardInterrupt:
            typer.echo("\ninterrupted", err=True)
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except ContextLedgerError as exc:
            code = exit_code_for(exc)
            logger.debug("exit_code=<%d> | command failed", code, exc_info=exc)
            typer.echo(f"error: {one_line(mask_secrets(str(exc) or type(exc).__name__))}", err=True)
            raise typer.Exit(code) from None


class RootGroup(LedgerGroup):
    """``contextledger`` itself: every command of :data:`COMMANDS`."""

    table = COMMANDS


app = typer.Typer(
    cls=RootGroup,
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
        from contextledger import __version__  # imported only when asked

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
    forget_urls()
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
