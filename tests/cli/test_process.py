"""The command as a process: ``python -m``, a lazy ``--version``, Ctrl-C, the pager, completion."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import time
import urllib.request
from pathlib import Path

import pytest

from contextledger import Ledger, Message
from contextledger.cli import ExitCode

from .conftest import Invoke

PYTHON = sys.executable


def _ledger(tmp_path: Path, turns: int = 40) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("long", "a")
        for turn in range(turns):
            conversation.append(Message.user(f"question {turn}"), Message.assistant(f"answer {turn}"))
    return url


def test_python_dash_m_and_version() -> None:
    import contextledger

    result = subprocess.run([PYTHON, "-m", "contextledger", "--version"], capture_output=True, text=True, check=True)
    # The package declares its version (the build and the changelog follow it: tests/docs/test_changelog.py).
    assert result.stdout == f"contextledger {contextledger.__version__}\n"


def test_version_imports_neither_the_cli_nor_the_stores() -> None:
    code = (
        "import sys; sys.argv = ['contextledger', '--version']\n"
        "from contextledger.__main__ import main; main()\n"
        "heavy = [m for m in ('typer', 'click', 'rich', 'sqlalchemy', 'pydantic', 'redis') if m in sys.modules]\n"
        "print(heavy)"
    )
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


def test_ctrl_c_while_serving_exits_130(tmp_path: Path) -> None:
    url = _ledger(tmp_path, turns=2)
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [PYTHON, "-m", "contextledger", "serve", "--url", url, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == ExitCode.INTERRUPTED
    assert b"Traceback" not in err


def test_ctrl_c_in_a_command_exits_130(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _ledger(tmp_path, turns=2)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Ledger, "history", interrupted)
    result = invoke("history", "long", "--url", url)
    assert result.exit_code == ExitCode.INTERRUPTED
    assert "interrupted" in result.stderr


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the command with stdout on a 24x100 pseudo-terminal; return its exit code and screen text."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(args, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return process.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def test_long_output_is_paged_on_a_terminal_never_when_piped(tmp_path: Path) -> None:
    url = _ledger(tmp_path)
    paged = tmp_path / "paged.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PAGER")}
    env["CONTEXTLEDGER_PAGER"] = f"sh -c 'cat > {paged}'"
    command = [PYTHON, "-m", "contextledger", "history", "long", "--url", url]
    code, screen = _on_a_terminal(command, env)
    assert code == 0, screen
    assert "History of long" in paged.read_text()
    assert "question 39" in paged.read_text()
    assert "History of long" not in screen  # it went to the pager, not the terminal
    paged.unlink()
    # a short listing fits the screen: no pager
    code, screen = _on_a_terminal([*command, "--last", "3"], env)
    assert code == 0
    assert "answer 39" in screen
    assert not paged.exists()
    # piped: never paged
    piped = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert "question 39" in piped.stdout
    assert not paged.exists()
    # --no-pager on a terminal
    code, screen = _on_a_terminal([*command, "--no-pager"], env)
    assert code == 0
    assert "question 39" in screen
    assert not paged.exists()


def test_shell_completion_is_offered(invoke: Invoke) -> None:
    help_text = invoke("--help").stdout
    assert "--install-completion" in help_text
    assert "--show-completion" in help_text
    env = {
        **os.environ,
        "_CONTEXTLEDGER_COMPLETE": "complete_bash",
        "COMP_WORDS": "contextledger hist",
        "COMP_CWORD": "1",
    }
    result = subprocess.run([PYTHON, "-m", "contextledger"], capture_output=True, text=True, env=env)
    assert "history" in result.stdout
