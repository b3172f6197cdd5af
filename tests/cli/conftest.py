"""Fixtures for the command-line tests: a runner on the real Typer app, and real ledgers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from contextledger import ContextWindowOverflowError, Ledger, Message
from contextledger.cli import app
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager

Invoke = Callable[..., Result]

# Backends a CLI test runs on; postgres/redis come from the plugin fixtures (real servers).
LEDGER_BACKENDS = ["sqlite", "postgres", "redis"]


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run ``contextledger ARGS`` through the Typer app, as the console script does."""
    monkeypatch.delenv("CONTEXTLEDGER_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        return CliRunner().invoke(app, list(args), input=input, env=env, catch_exceptions=False)

    return run


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL of a SQLite ledger file that does not exist yet."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=LEDGER_BACKENDS)
def ledger_url(request: pytest.FixtureRequest, sqlite_url: str) -> Iterator[str]:
    """An empty ledger URL on each backend (the server ones from the plugins' fixtures)."""
    if request.param == "sqlite":
        yield sqlite_url
        return
    fixture = {"postgres": "postgres_ledger_url", "redis": "redis_url"}[request.param]
    url: str = request.getfixturevalue(fixture)
    yield url


@dataclass(frozen=True)
class Populated:
    """A ledger filled through the library API; tests compare the CLI against its queries."""

    url: str
    pinned_id: str
    image_id: str
    image_bytes: bytes


@pytest.fixture
def populated(ledger_url: str) -> Iterator[Populated]:
    """Session ``alpha`` (agents ``main`` and ``helper``) with evictions, reactive
    reductions, truncation revisions, superseded summaries, pins and binary content;
    session ``beta`` with two plain messages."""
    image = bytes(range(256)) * 4
    with Ledger.connect(ledger_url) as ledger:
        for session in ("alpha", "beta"):
            ledger.delete_session(session)
        main = ledger.conversation(
            "alpha", "main", manager=SlidingWindowConversationManager(window_size=6, truncate_threshold=100)
        )
        (first,) = main.append(Message.user("[turn 1] Remember: the launch date is 3 March."))
        main.pin(first.message_id)
        (shot,) = main.append(
            Message(
                role="user",
                content=[{"text": "a screenshot"}, {"image": {"format": "png", "source": {"bytes": image}}}],
            )
        )
        for turn in range(2, 7):
            main.append(
                Message.tool_use(f"call-{turn}", "search", {"q": f"topic {turn}"}, text=f"[turn {turn}] searching"),
                Message.tool_result(f"call-{turn}", "result line. " * 40),
                Message.assistant(f"answer {turn}"),
            )
        main.pin(shot.message_id)
        main.reduce("manual")
        main.append(Message.user("[turn 7] and now?"))
        overflow = ContextWindowOverflowError("input is too long for the model")
        main.reduce("reactive", error=overflow)  # truncates the old tool results (revisions)
        main.reduce("reactive", error=overflow)  # nothing left to truncate: evicts the oldest pair

        helper = ledger.conversation(
            "alpha", "helper", manager=SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
        )
        for turn in range(8):
            helper.append(Message.user(f"question {turn}"), Message.assistant(f"reply {turn}. More detail follows."))
        helper.reduce("proactive")
        helper.append(Message.user("one more"), Message.assistant("ok"))
        helper.reduce("proactive")

        beta = ledger.conversation("beta", "solo")
        beta.append(Message.user("hello"), Message.assistant("hi"))
    yield Populated(url=ledger_url, pinned_id=first.message_id, image_id=shot.message_id, image_bytes=image)
    with Ledger.connect(ledger_url) as ledger:
        for session in ("alpha", "beta"):
            ledger.delete_session(session)
