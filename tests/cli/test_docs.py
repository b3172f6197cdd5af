"""The documented commands are the ones that work: the README's two, the CLI page's, docker-compose.yml."""

from __future__ import annotations

import re

import yaml

from contextledger.cli import ExitCode
from tests.docs.examples import DOCS, README, ROOT, blocks, name_of, pages

from .conftest import Invoke

CLI_PAGE = DOCS / "cli.md"
BACKENDS_PAGE = DOCS / "backends.md"


def test_the_two_setup_commands() -> None:
    commands = [b.code.strip() for b in blocks(README) if b.language == "sh"][:2]
    assert commands == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/contextledger demo",
        "scripts/test",
    ]


def test_documented_exit_codes_match() -> None:
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", CLI_PAGE.read_text(encoding="utf-8"), re.MULTILINE))
    assert {int(code) for code in rows} == {int(code) for code in ExitCode}
    assert "schema" in rows[str(int(ExitCode.SCHEMA))]
    assert "could not be opened" in rows[str(int(ExitCode.UNAVAILABLE))]


def test_documented_commands_exist(invoke: Invoke) -> None:
    (reference,) = [b.code for b in blocks(CLI_PAGE) if b.language == "text" and "contextledger sessions" in b.code]
    for line in reference.splitlines():
        words = line.split("#", 1)[0].split()
        assert words[0] == "contextledger"
        command = words[1:3] if words[1] in {"db", "import"} else words[1:2]
        if words[1] == "db":
            for sub in ("upgrade", "current", "partition"):
                assert invoke("db", sub, "--help").exit_code == 0
            continue
        result = invoke(*command, "--help")
        assert result.exit_code == 0, line
        for option in re.findall(r"--[a-z-]+", line):
            assert option in result.stdout, (line, option)


def test_docker_compose_services() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    services = compose["services"]
    assert set(services) == {"postgres", "redis"}
    for name, service in services.items():
        assert service["healthcheck"]["test"], name
        (volume,) = service["volumes"]
        assert volume.split(":", 1)[0] in compose["volumes"], name
        assert all(port.startswith("127.0.0.1:") for port in service["ports"]), name
    command = services["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    env = services["postgres"]["environment"]
    url = f"postgresql+psycopg://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@127.0.0.1:5432/{env['POSTGRES_DB']}"
    page = BACKENDS_PAGE.read_text(encoding="utf-8")
    assert f"CONTEXTLEDGER_TEST_POSTGRES_URL={url}" in page
    assert f"contextledger demo --url {url}" in page
    assert "CONTEXTLEDGER_TEST_REDIS_URL=redis://127.0.0.1:6379/0" in page


def test_every_shell_example_names_real_commands_and_options(invoke: Invoke) -> None:
    """The ``contextledger ...`` lines of every page's sh blocks: each command and each option exists."""
    checked = 0
    for page in pages():
        for block in blocks(page):
            if block.language != "sh":
                continue
            for line in block.code.splitlines():
                words = line.split("#", 1)[0].split("|", 1)[0].split()
                if words[:1] not in (["contextledger"], [".venv/bin/contextledger"]):
                    continue
                group = words[1] in {"db", "encryption"} or (words[1] == "import" and words[2:3] == ["strands"])
                command = words[1:3] if group else words[1:2]
                result = invoke(*command, "--help")
                assert result.exit_code == 0, f"{name_of(page)}: {line}"
                for option in re.findall(r"(?<!\S)--[a-z-]+", line.split("#", 1)[0]):
                    assert option in result.stdout, f"{name_of(page)}: {line} ({option})"
                checked += 1
    assert checked >= 10
