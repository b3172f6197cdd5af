"""The moving and expiry examples of the docs run as written (the Redis one against the test server)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from redis import Redis

from contextledger.stores.redis.keys import ConversationKeys
from tests.cli.conftest import Invoke
from tests.docs.examples import DOCS, blocks

MOVING = DOCS / "operations" / "moving.md"
RETENTION = DOCS / "operations" / "retention.md"


def test_the_moving_commands_run_as_written(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for block in blocks(MOVING):
        if block.language == "python":  # the examples before the commands make agents.db
            exec(compile(block.code, str(MOVING), "exec"), {"__name__": "docs_example"})
    (commands,) = [b.code for b in blocks(MOVING) if b.language == "sh" and "contextledger copy" in b.code]
    for _ in range(2):  # and again: importing or copying what is already there changes nothing
        for line in commands.strip().splitlines():
            words = shlex.split(line)
            assert words[0] == "contextledger"
            result = invoke(*words[1:])
            assert result.exit_code == 0, (line, result.stderr)
    original = invoke("export", "travel-1", "--url", "sqlite:///agents.db").stdout
    assert '"type":"reduction"' in original  # the session moved with its history
    for url in ("sqlite:///moved.db", "sqlite:///copy.db"):
        assert invoke("export", "travel-1", "--url", url).stdout == original


def test_the_ttl_example_runs_on_redis(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = [b.code for b in blocks(RETENTION) if b.language == "py"]  # `py`: it needs a server
    assert "ttl=" in block
    code = block.replace("redis://localhost:6379/0", redis_url)
    for _ in range(2):
        exec(compile(code, str(RETENTION), "exec"), {"__name__": "docs_example"})
    assert "expires an hour after" in capsys.readouterr().out
    client = Redis.from_url(redis_url)
    assert not client.exists(ConversationKeys.of("docs-ttl", "short-lived", "default").state)
