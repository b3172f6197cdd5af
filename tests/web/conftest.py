"""Fixtures of the web tests: ledgers, the real server on a free loopback port, a real browser.

The demo ledger is made by ``contextledger demo`` plus one multi-agent session written
through the library (an image, a tool pair, pins, a summary chain); the long ledger holds
a two-agent session of 2,000 turns each (:mod:`tests.web.longsession`). The server is
``python -m contextledger serve`` in a subprocess; the browser is Debian's Chromium
driven by Playwright, each page watched for script errors, dialogs, requests elsewhere
and Content-Security-Policy violations. Under ``CI=true`` a missing browser fails
instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextledger import ContextWindowOverflowError, Ledger, Message
from contextledger.cli import app
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager
from tests.plugins import unavailable
from tests.web.longsession import LongSession, build_long_session
from tests.web.png import tiny_png

CHROMIUM = os.environ.get("CONTEXTLEDGER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MULTI = "research-42"


@dataclass(frozen=True)
class DemoLedger:
    """The demo's ledger file, plus ids of the multi-agent session the tests look for."""

    path: Path
    url: str
    image_id: str
    tool_use_id: str
    tool_result_id: str
    pinned_id: str


def _multi_agent_session(url: str) -> dict[str, str]:
    with Ledger.connect(url) as ledger:
        lead = ledger.conversation(
            MULTI, "lead", manager=SlidingWindowConversationManager(window_size=8, truncate_threshold=120)
        )
        (goal,) = lead.append(Message.user("[turn 1] Goal: compare three vector databases for the docs search."))
        lead.pin(goal.message_id)
        (shot,) = lead.append(
            Message(
                role="user",
                content=[
                    {"text": "the current latency chart"},
                    {"image": {"format": "png", "source": {"bytes": tiny_png()}}},
                ],
            )
        )
        ids: dict[str, str] = {"pinned_id": goal.message_id, "image_id": shot.message_id}
        for turn in range(2, 9):
            lead.before_model_call()
            use, result, _ = lead.append(
                Message.tool_use(f"t{turn}", "search", {"q": f"benchmark {turn}"}, text=f"[turn {turn}] searching"),
                Message.tool_result(f"t{turn}", f"result {turn}: " + "p99 latency figures. " * 30),
                Message.assistant(f"Noted the figures of round {turn}."),
            )
            lead.after_model_call()
            ids.setdefault("tool_use_id", use.message_id)
            ids.setdefault("tool_result_id", result.message_id)
            lead.append(Message.user(f"[turn {turn + 1}] next round"))
            lead.after_invocation()
        overflow = ContextWindowOverflowError("input is too long for the model")
        lead.reduce("reactive", error=overflow)
        writer = ledger.conversation(
            MULTI, "writer", manager=SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
        )
        for turn in range(10):
            writer.before_model_call()
            writer.append(Message.user(f"draft section {turn}"), Message.assistant(f"Section {turn} drafted. " * 4))
            writer.after_model_call()
            if turn % 3 == 2:
                writer.reduce("proactive")
    return ids


@pytest.fixture(scope="session")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> DemoLedger:
    """``contextledger demo`` run on a fresh file, plus the multi-agent session."""
    path = tmp_path_factory.mktemp("web") / "demo.db"
    url = f"sqlite:///{path}"
    result = CliRunner().invoke(app, ["demo", "--url", url, "--turns", "12", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ids = _multi_agent_session(url)
    return DemoLedger(path=path, url=url, **ids)


def free_port() -> int:
    """A port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Server:
    """A running ``contextledger serve``."""

    base: str
    process: subprocess.Popen[bytes]


@contextmanager
def serving(path: Path, log_dir: Path) -> Iterator[Server]:
    """``python -m contextledger serve`` over the SQLite file ``path`` on a free loopback port, stopped after."""
    port = free_port()
    log = (log_dir / "serve.log").open("wb")
    # A relative URL from the ledger's folder: the pages (and the screenshots) show no machine path.
    process = subprocess.Popen(
        [sys.executable, "-m", "contextledger", "serve", "--url", f"sqlite:///{path.name}", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=path.parent,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server did not start: {Path(log.name).read_text(errors='replace')}")
                time.sleep(0.1)
        yield Server(base=base, process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="session")
def server(demo_ledger: DemoLedger, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo ledger served on a free loopback port."""
    with serving(demo_ledger.path, tmp_path_factory.mktemp("serve")) as running:
        yield running


@dataclass(frozen=True)
class LongLedger:
    """A SQLite file holding the two-agent session of 2,000 turns each (see :mod:`tests.web.longsession`)."""

    path: Path
    url: str
    session: LongSession


@pytest.fixture(scope="session")
def long_ledger(tmp_path_factory: pytest.TempPathFactory) -> LongLedger:
    """The 2,000-turn session, written once per test session (a few seconds)."""
    path = tmp_path_factory.mktemp("long") / "long.db"
    url = f"sqlite:///{path}"
    return LongLedger(path=path, url=url, session=build_long_session(url))


@pytest.fixture(scope="session")
def long_server(long_ledger: LongLedger, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The 2,000-turn session served on a free loopback port."""
    with serving(long_ledger.path, tmp_path_factory.mktemp("serve-long")) as running:
        yield running


# One per module, not per session: while it is open, Playwright's sync API keeps an event
# loop running on the main thread, and a test of another directory collected after these
# (``asyncio.run`` in the main thread) would find it running and fail.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through Playwright (Debian's binary; nothing downloaded)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[dev]')")
    executable = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if not executable:
        unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


# Runs before any script of a page: records what a strict policy refused, and any dialog.
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "") + " " + (e.sample || ""));
});
"""


class Watched:
    """What a page did that it must not: script errors, refused content, dialogs, requests elsewhere."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.requested: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("request", lambda request: self.requested.append(request.url))
        page.on("response", self._response)
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("console", self._console)
        page.on("dialog", self._dialog)

    def _response(self, response: Any) -> None:
        # A page's own status is its test's business; a failed subresource is an error here.
        if response.status >= 400 and response.request.resource_type != "document":
            self.errors.append(f"{response.status}: {response.url}")

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} at {message.location}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def clean(self) -> None:
        """Fail if anything ran that should not have, or was refused by the policy."""
        violations = self.page.evaluate("window.__violations || []")
        pwned = self.page.evaluate("window.__pwned || 0")
        assert (self.errors, self.dialogs, violations, pwned) == ([], [], [], 0)

    def local_only(self, base: str) -> None:
        """Fail if the page fetched anything but its own server, ``data:`` or its own file."""
        outside = [u for u in self.requested if not u.startswith((base, "data:", "file:"))]
        assert outside == [], f"the page fetched from elsewhere: {outside}"


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser context 1400 px wide that reports policy violations to the page."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script(WATCH)
    yield ctx
    ctx.close()


@pytest.fixture
def offline(browser: Any) -> Iterator[Any]:
    """A fresh, offline browser context (for the self-contained files)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    ctx.add_init_script(WATCH)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: Any) -> Any:
    """A fresh page recording every request (``page.requested``) and what it must not do (``page.watch``)."""
    page = context.new_page()
    page.watch = Watched(page)
    page.requested = page.watch.requested
    return page


def screenshot_dir() -> Path | None:
    """Where screenshots are also written for the docs (``CONTEXTLEDGER_SCREENSHOT_DIR``), if anywhere."""
    value = os.environ.get("CONTEXTLEDGER_SCREENSHOT_DIR")
    return Path(value) if value else None
