"""The README's moving and expiry examples run as written (the Redis one against the test server)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from redis import Redis

from contextledger.stores.redis.keys import ConversationKeys
from tests.cli.conftest import Invoke
from tests.cli.test_readme import _blocks


def test_the_moving_commands_run_as_written(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for block in _blocks("python"):  # the examples before it fill agents.db
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
    (commands,) = [b for b in _blocks("sh") if "contextledger copy" in b]
    for line in commands.strip().splitlines():
        words = shlex.split(line)
        assert words[0] == "contextledger"
        result = invoke(*words[1:])
        assert result.exit_code == 0, (line, result.stderr)
    original = invoke("export", "travel-1", "--url", "sqlite:///agents.db").stdout
    assert '"type":"tombstone"' in original  # the erasure example left one
    for url in ("sqlite:///moved.db", "sqlite:///copy.db"):
        assert invoke("export", "travel-1", "--url", url).stdout == original


def test_the_ttl_example_runs_on_redis(redis_url: str) -> None:
    (block,) = _blocks("py")  # `py`, not `python`: the other examples run without a Redis server
    assert "ttl=" in block
    code = block.replace("redis://localhost:6379/0", redis_url)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    client = Redis.from_url(redis_url)
    assert not client.exists(ConversationKeys.of("readme-ttl", "short-lived", "default").state)
