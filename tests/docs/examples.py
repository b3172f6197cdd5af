"""The code examples of the documentation: found in the pages, and run as a reader would.

Imported by the tests to find the pages and their blocks; run as a script
(``python -P examples.py PAGE [NAME]``) to execute one page's ```python blocks in order,
in the current directory, as one fresh process -- what a reader who copies them does.
Each block gets a namespace of its own (a block must work when copied alone), must print
what it did, and may reach the network only on loopback. A failure names the page and
the line of the Markdown file (the code is compiled with the page's line numbers) and
exits 1.

Kept free of test-only imports: the script runs in a fresh interpreter.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
# ```python runs; ```text, ```sh, ... never do. ```py marks an example that needs a server
# (the tests run it against their own, see tests/lifecycle/test_docs_moving.py).
LANGUAGES = frozenset({"python", "py", "sh", "text", "toml", "yaml", "json", "jsonl", "html", ""})


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown page."""

    language: str
    code: str
    line: int  # 1-based line of the block's first code line in the page
    indent: str


def pages() -> list[Path]:
    """README.md and every page of the site, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def name_of(page: Path) -> str:
    """The page's path relative to the repository root (a page elsewhere: its full path)."""
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else str(page)


def blocks(page: Path) -> list[Block]:
    """Every fenced code block of ``page``, in order."""
    return list(_blocks(page.read_text(encoding="utf-8").splitlines()))


def _blocks(lines: list[str]) -> Iterator[Block]:
    opened: tuple[re.Match[str], int] | None = None
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        if opened is None:
            match = FENCE.match(line)
            if match:
                opened, body = (match, number), []
            continue
        start, first = opened
        stripped = line.strip()
        if stripped.startswith(start["fence"]) and not stripped.strip(start["fence"][0]):
            indent = start["indent"]
            code = "\n".join(b[len(indent) :] if b.startswith(indent) else b.lstrip() for b in body)
            yield Block(start["info"].strip().split(" ")[0], code + "\n", first + 1, indent)
            opened = None
        else:
            body.append(line)


def python_blocks(page: Path) -> list[Block]:
    """The blocks of ``page`` that run: ```python fences."""
    return [block for block in blocks(page) if block.language == "python"]


class _Counting:
    """A stdout that remembers whether anything but white space was written."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.printed = False

    def write(self, text: str) -> int:
        self.printed = self.printed or bool(text.strip())
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _loopback_only(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: examples are offline, so only loopback and local sockets are allowed."""
    if event != "socket.connect":
        return
    sock, address = args
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    host = address[0]
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if not local:
        raise ConnectionRefusedError(f"a documentation example must run offline; it connected to {host!r}")


def run(page: Path, name: str) -> int:
    """Run the ```python blocks of ``page`` in order; 0 when all ran and printed something."""
    sys.addaudithook(_loopback_only)
    stdout = _Counting(sys.stdout)
    sys.stdout = stdout  # the wrapper forwards everything else
    for block in python_blocks(page):
        # Padded with blank lines so that tracebacks give the line of the Markdown page.
        code = compile("\n" * (block.line - 1) + block.code, name, "exec")
        stdout.printed = False
        try:
            exec(code, {"__name__": "__main__"})
        except BaseException:
            sys.stdout.flush()
            sys.stderr.write(f"{name}:{block.line}: the example failed\n{traceback.format_exc()}")
            return 1
        if not stdout.printed:
            sys.stderr.write(f"{name}:{block.line}: the example printed nothing; show what it did\n")
            return 1
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    page = Path(sys.argv[1])
    sys.exit(run(page, sys.argv[2] if len(sys.argv) > 2 else str(page)))
