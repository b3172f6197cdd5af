"""What the Redis index-paging tests share: watching a server's commands, the CLI's ``--last 3``, an index's ttl."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli import app
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys

from .conftest import Backend
from .test_hot_path import monitored, monitored_cluster

Commands = list[dict[str, Any]]


def watch(backend: Backend) -> AbstractContextManager[Commands]:
    """The commands ``backend`` receives while the block runs (MONITOR on every node of a cluster)."""
    return monitored_cluster(backend.url) if backend.cluster else monitored(backend.url)


def assert_cli_last_3_reads_3(
    redis_url: str,
    listing: str,
    session: str,
    build: Callable[[RedisStore, str], list[str]],
    read: Callable[[Commands, ConversationKeys], list[str] | None],
    options: tuple[str, ...] = (),
) -> None:
    """``contextledger LISTING SESSION [OPTIONS] --last 3`` reads the last 3 rows ``build`` returns.

    The rows read are what ``read`` finds sent to the server.
    """
    with Ledger.connect(redis_url) as ledger:  # the CLI opens the default key prefix and agent
        store = ledger.store
        assert isinstance(store, RedisStore)
        ids = build(store, session)
        keys = ConversationKeys.of(store.key_prefix, session, "default")
        try:
            with monitored(redis_url) as commands:
                result = CliRunner().invoke(
                    app,
                    [listing, session, "--url", redis_url, *options, "--last", "3", "--json"],
                    catch_exceptions=False,
                )
            assert result.exit_code == 0, result.output
            assert read(commands, keys) == ids[-3:]
        finally:
            ledger.delete_session(session)


def assert_expires_with_the_conversation(client: Any, index: str, keys: ConversationKeys) -> None:
    """The index key carries the conversation's ttl (set with its state, so at most a second apart)."""
    assert 0 < client.pttl(index) <= client.pttl(keys.state) + 1000
