"""Every ```python example of the site and of README.md runs as written, again and again.

Each page's blocks run in order, as one fresh process, in a fresh temporary directory
(relative ``sqlite:///name.db`` URLs land there), offline; then once more in the same
directory, as a reader who runs them twice would. A failure names the page and the
line of the Markdown file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.examples import LANGUAGES, ROOT, Block, blocks, name_of, pages, python_blocks, run

RUNNABLE = [page for page in pages() if python_blocks(page)]
# A page runs in a process of its own; a stuck example fails the test instead of hanging it.
TIMEOUT = 300


def _run_page(page: Path, directory: Path) -> subprocess.CompletedProcess[str]:
    script = Path(__file__).with_name("examples.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-P", str(script), str(page), name_of(page)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.mark.parametrize("page", RUNNABLE, ids=name_of)
def test_the_examples_of_a_page_run_twice_in_one_directory(page: Path, tmp_path: Path) -> None:
    for attempt in ("first", "second"):
        result = _run_page(page, tmp_path)
        assert result.returncode == 0, f"{attempt} run of {name_of(page)}:\n{result.stderr}\n{result.stdout}"
        assert result.stdout.strip(), f"{attempt} run of {name_of(page)} printed nothing"


def test_the_site_has_examples_to_run() -> None:
    names = {name_of(page) for page in RUNNABLE}
    for expected in ("README.md", "docs/hosts/strands.md", "docs/hosts/openai-agents.md", "docs/time-travel.md"):
        assert expected in names


def test_no_example_hides_from_the_runner() -> None:
    """A typo in a fence's language, or a fence indented into a list, would skip an example silently."""
    for page in pages():
        for block in blocks(page):
            where = f"{name_of(page)}:{block.line - 1}"
            assert block.language in LANGUAGES, f"{where}: unknown fence language {block.language!r}"
            assert not (block.language == "python" and block.indent), f"{where}: an indented python example"


def test_a_failing_example_names_its_page_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nprint('fine')\n```\n\ntext\n\n```python\nx = 1\nraise ValueError(x)\n```\n")
    assert [b.line for b in python_blocks(page)] == [4, 10]
    result = _run_page(page, tmp_path)
    assert result.returncode == 1
    assert f"{page}:10: the example failed" in result.stderr
    assert f'File "{page}", line 11' in result.stderr  # the traceback points into the Markdown page
    assert "fine" in result.stdout


def test_an_example_that_prints_nothing_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n")
    result = _run_page(page, tmp_path)
    assert result.returncode == 1
    assert f"{page}:2: the example printed nothing" in result.stderr


def test_an_example_that_goes_online_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    # 192.0.2.1 is TEST-NET-1: never routed, so even without the guard nothing would leave the machine.
    page.write_text(
        "```python\nimport socket\n\nsocket.create_connection(('192.0.2.1', 80), timeout=2)\nprint('online')\n```\n"
    )
    result = _run_page(page, tmp_path)
    assert result.returncode == 1
    assert "must run offline" in result.stderr


def test_loopback_stays_allowed(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport socket\n\n"
        "with socket.socket() as server:\n"
        "    server.bind(('127.0.0.1', 0))\n"
        "    server.listen()\n"
        "    socket.create_connection(server.getsockname(), timeout=2).close()\n"
        "print('loopback is fine')\n```\n"
    )
    result = _run_page(page, tmp_path)
    assert result.returncode == 0, result.stderr


def test_blocks_keep_their_lines_and_languages(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("intro\n\n```sh\nls\n```\n\n- item\n\n    ```text\n    inside a list\n    ```\n")
    assert blocks(page) == [Block("sh", "ls\n", 4, ""), Block("text", "inside a list\n", 10, "    ")]


def test_the_runner_runs_in_this_process_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` is importable (the test above runs it as a script); here it reports on stderr and returns 1."""
    page = tmp_path / "page.md"
    page.write_text("```python\nraise SystemExit(3)\n```\n")
    monkeypatch.setattr(sys, "addaudithook", lambda hook: None)  # an audit hook cannot be removed again
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    assert run(page, "page.md") == 1
