"""The README's commands and examples are the ones that work, and docker-compose.yml is what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from contextledger import Ledger
from contextledger.cli import ExitCode

from .conftest import Invoke

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README) if lang == language]


def test_the_two_setup_commands() -> None:
    commands = [b.strip() for b in _blocks("sh")][:2]
    assert commands == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/contextledger demo",
        "scripts/test",
    ]


def test_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Python block runs as written, in order, in one directory (the Strands one with a scripted model)."""
    monkeypatch.chdir(tmp_path)
    blocks = _blocks("python")
    assert len(blocks) >= 4
    strands_blocks = 0
    for block in blocks:
        # The Strands quickstart runs as written: its model is the packaged ScriptedModel.
        strands_blocks += "LedgerSessionManager(" in block
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
    assert strands_blocks == 1
    with Ledger.connect("sqlite:///agents.db") as ledger:
        assert ledger.agents("support-42") == ["assistant"]
        assert ledger.agents("customer-7731") == ["support"]
        view = ledger.conversation("customer-7731", "support").view
        assert view[0].pinned  # the scripted model pinned the first message with the pin tool
        assert "damaged" in view[0].message.plain_text


def test_plain_python_quickstart_runs_again_on_the_same_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newcomer runs the quickstart twice: the second run continues the same conversation."""
    monkeypatch.chdir(tmp_path)
    quickstart = next(b for b in _blocks("python") if "call_model" in b)
    for _ in range(2):
        exec(compile(quickstart, "README.md", "exec"), {"__name__": "readme_example"})
    with Ledger.connect("sqlite:///agents.db") as ledger:
        conversation = ledger.conversation("support-42", "assistant")
        assert conversation.model_call_count == 2
        assert conversation.view[0].pinned


def test_documented_exit_codes_match(invoke: Invoke) -> None:
    rows = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", README, re.MULTILINE))
    assert {int(code) for code in rows} == {int(code) for code in ExitCode}
    assert "schema" in rows[str(int(ExitCode.SCHEMA))]
    assert "could not be opened" in rows[str(int(ExitCode.UNAVAILABLE))]


def test_documented_commands_exist(invoke: Invoke) -> None:
    reference = next(b for lang, b in FENCE.findall(README) if lang == "" and "contextledger sessions" in b)
    for line in reference.splitlines():
        words = line.split("#", 1)[0].split()
        assert words[0] == "contextledger"
        command = words[1:3] if words[1] in {"db", "import"} else words[1:2]
        if words[1] == "db":
            for sub in ("upgrade", "current"):
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
    assert f"CONTEXTLEDGER_TEST_POSTGRES_URL={url}" in README
    assert f"contextledger demo --url {url}" in README
    assert "CONTEXTLEDGER_TEST_REDIS_URL=redis://127.0.0.1:6379/0" in README
