"""The command table: each command imported only when it runs; ``history`` pulls in nothing it does not use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from contextledger import Ledger, Message, SlidingWindowConversationManager
from contextledger.cli.app import COMMANDS, LedgerGroup, Subcommands, app

from .conftest import Invoke

# Modules a read of the ledger has no use for: the web view, the demo, migrations, other commands.
NOT_FOR_HISTORY = (
    "alembic",
    "uvicorn",
    "starlette",
    "jinja2",
    "strands",
    "contextledger.web",
    "contextledger.demo",
    "contextledger.cli.demo",
    "contextledger.cli.server",
    "contextledger.cli.db",
    "contextledger.cli.importer",
    "contextledger.cli.entries",
    "contextledger.cli.lifecycle",
)


def _modules_after(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    """Run ``contextledger ARGV`` in a fresh interpreter: its exit code, every module it imported, its stdout."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['contextledger', *{argv!r}]\n"
        "from contextledger.__main__ import main\n"
        "try:\n    main()\n    status = 0\n"
        "except SystemExit as exc:\n    status = exc.code or 0\n"
        "sys.stderr.write('\\n' + json.dumps([status, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **(env or {})}
    )
    status, modules = json.loads(done.stderr.splitlines()[-1])
    return status, set(modules), done.stdout


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(name for name in names if any(m == name or m.startswith(name + ".") for m in modules))


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("s", "a")
        for turn in range(5):
            conversation.append(Message.user(f"question {turn}"), Message.assistant(f"answer {turn}"))
    return url


def test_history_imports_only_what_a_read_needs(sqlite_ledger: str) -> None:
    status, modules, _ = _modules_after(["history", "s", "--url", sqlite_ledger])
    assert status == 0
    assert "contextledger.cli.inspector" in modules  # the command did run
    assert _loaded(modules, NOT_FOR_HISTORY) == []


@pytest.fixture
def reduced_ledger(tmp_path: Path) -> tuple[str, str]:
    """A SQLite ledger whose session has evictions, a reduction and a pin; and the id of its first message."""
    url = f"sqlite:///{tmp_path / 'reduced.db'}"
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("s", "a", manager=SlidingWindowConversationManager(window_size=4))
        for turn in range(6):
            conversation.append(Message.user(f"question {turn}"), Message.assistant(f"answer {turn}"))
            conversation.before_model_call()
        conversation.pin_index(len(conversation.view) - 1, True)
        conversation.reduce("manual")
        first = ledger.history("s", "a")[0].message.message_id
    return url, first


# Every command that lists what a ledger holds (show twice: its live view and a past model call's input).
LISTINGS = [
    ["sessions"],
    ["show", "s"],
    ["show", "s", "--at-call", "2"],
    ["history", "s"],
    ["evictions", "s"],
    ["summaries", "s"],
    ["reductions", "s"],
    ["revisions", "s"],
    ["pins", "s"],
    ["message", "{first}"],
]


@pytest.mark.parametrize("argv", LISTINGS, ids=" ".join)
def test_a_listing_of_a_sqlite_file_never_imports_sqlalchemy(reduced_ledger: tuple[str, str], argv: list[str]) -> None:
    url, first = reduced_ledger
    status, modules, out = _modules_after([a.format(first=first) for a in argv] + ["--url", url])
    assert status == 0
    assert out.strip()  # it did list something
    assert _loaded(modules, ("sqlalchemy", "alembic")) == []


def test_a_typo_and_completion_import_no_other_command() -> None:
    status, modules, _ = _modules_after(["histroy"])  # the suggestion comes from the table's names
    assert status == 2
    assert _loaded(modules, ("contextledger.cli.inspector", *NOT_FOR_HISTORY)) == []
    completion = {"_CONTEXTLEDGER_COMPLETE": "complete_bash", "COMP_WORDS": "contextledger hist", "COMP_CWORD": "1"}
    status, modules, out = _modules_after([], env=completion)
    assert status == 0
    assert out.split() == ["history"]
    assert _loaded(modules, NOT_FOR_HISTORY) == []


def test_every_table_entry_names_a_function(invoke: Invoke) -> None:
    help_text = invoke("--help").stdout
    for name, entry in COMMANDS.items():
        assert name in help_text
        targets = entry.commands.values() if isinstance(entry, Subcommands) else [entry]
        for target in targets:
            module, _, function = target.partition(":")
            assert callable(getattr(__import__(module, fromlist=[function]), function)), target
        if isinstance(entry, Subcommands):
            sub_help = invoke(name, "--help").stdout
            assert all(sub in sub_help for sub in entry.commands)


def test_unknown_command_names_the_closest_one(invoke: Invoke) -> None:
    result = invoke("histroy", "x")
    assert result.exit_code == 2
    assert "No such command 'histroy'" in result.stderr
    assert "'history'" in result.stderr


def test_a_group_takes_built_commands_too() -> None:
    """``add_typer``/``add_command`` keep working next to the table (for commands made elsewhere)."""
    extra = typer.Typer()

    @extra.command("hello")
    def hello() -> None:
        typer.echo("hello from a built command")

    group = typer.main.get_command(app)
    assert isinstance(group, LedgerGroup)
    built = typer.main.get_command(extra)
    group.add_command(built, "hello")
    assert "hello" in group.list_commands(typer.Context(group))
    assert list(group.list_commands(typer.Context(group)))[: len(COMMANDS)] == list(COMMANDS)
    with pytest.raises(SystemExit) as exit_info:
        group.main(["hello"], prog_name="contextledger")
    assert exit_info.value.code == 0
