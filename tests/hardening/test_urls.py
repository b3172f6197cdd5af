"""Ledger URLs: one parser, typed errors, and passwords never shown (messages, logs, CLI)."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from contextledger import Ledger
from contextledger.cli import app
from contextledger.errors import InvalidLedgerURL, StoreUnavailable
from contextledger.stores.urls import backend_of, mask, mask_text, parse_redis, parse_sql

SECRET = "s3cr3t-pa55"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"postgresql://user:{SECRET}@db/app", "postgresql://user:***@db/app"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        (f"redis://:{SECRET}@[::1]:6379/0", "redis://:***@[::1]:6379/0"),
        (f"redis://:{SECRET}@[::1/0", "redis://:***@[::1/0"),
        (f"redis://:{SECRET}@127.0.0.1:notaport/0", "redis://:***@127.0.0.1:notaport/0"),
        (f"mysql://root:{SECRET}@h/db", "mysql://root:***@h/db"),
        (f"user:{SECRET}@host/db", "user:***@host/db"),
        (f"postgresql://u:p@ss{SECRET}@h/db", "postgresql://u:***@h/db"),
        ("sqlite:////tmp/a@b:c.db", "sqlite:////tmp/a@b:c.db"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ],
)
def test_mask(url: str, masked: str) -> None:
    assert mask(url) == masked
    assert SECRET not in mask_text(f"failed on '{url}' twice: {url}", url)


BAD_URLS = [
    (f"mysql://root:{SECRET}@h/db", "unsupported ledger URL scheme"),
    (f"root:{SECRET}@h/db", "not a ledger URL"),
    (f"//root:{SECRET}@h/db", "not a ledger URL"),
    (f"redis://:{SECRET}@127.0.0.1:notaport/0", "Port"),
    (f"redis://:{SECRET}@127.0.0.1:99999/0", "Port"),
    (f"redis://:{SECRET}@[::1/0", "IPv6"),
    (f"redis://:{SECRET}@[not-ipv6]:6379/0", "IPv6"),
    (f"redis://:{SECRET}@127.0.0.1:6379/app", "database number"),
    (f"postgresql://u:{SECRET}@h:abc/d", "not a SQL ledger URL"),
]


@pytest.mark.parametrize(("url", "match"), BAD_URLS)
def test_bad_urls_are_typed_and_masked(url: str, match: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="contextledger")
    with pytest.raises(InvalidLedgerURL, match=match) as info:
        Ledger.connect(url)
    chain: BaseException | None = info.value
    while chain is not None:  # the whole chain a traceback would print
        assert SECRET not in str(chain)
        chain = chain.__cause__ or chain.__context__
    assert SECRET not in caplog.text


@pytest.mark.parametrize(("url", "match"), BAD_URLS)
def test_cli_bad_urls_exit_3_with_the_password_masked(url: str, match: str) -> None:
    for args in (["sessions", "--url", url], ["-vv", "sessions", "--url", url], ["db", "current", "--url", url]):
        result = CliRunner().invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 3, (args, result.output)
        assert SECRET not in result.output
        assert SECRET not in result.stderr
        # -vv logs the traceback on purpose (debug); otherwise the error is one line.
        assert result.stderr.strip().splitlines()[-1].startswith("error: ")
        if "-vv" not in args:
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_unreachable_server_errors_never_show_the_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="contextledger")
    for url in (f"redis://:{SECRET}@127.0.0.1:1/0", f"postgresql://u:{SECRET}@127.0.0.1:1/db"):
        with pytest.raises(StoreUnavailable) as info:
            Ledger.connect(url, **({"connect_timeout": 1} if url.startswith("postgresql") else {}))
        assert SECRET not in str(info.value)
        result = CliRunner().invoke(app, ["-vv", "sessions", "--url", url], catch_exceptions=False)
        assert result.exit_code == 4
        assert SECRET not in result.output
    assert SECRET not in caplog.text


def test_one_parser() -> None:
    assert backend_of("postgresql+psycopg://h/db") == "sql"
    assert backend_of("REDIS+CLUSTER://h:7000") == "redis"
    assert backend_of("memory://") == "memory"
    assert parse_sql("postgres://u:p@h/db").drivername == "postgresql+psycopg"
    parsed = parse_redis(f"rediss+cluster://:{SECRET}@[::1]:7000")
    assert parsed.cluster
    assert parsed.endpoint == "[::1]:7000"
    assert parsed.driver_url.startswith("rediss://")
    assert SECRET not in parsed.masked
