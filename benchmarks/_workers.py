"""The harness's side of the protocol: worker processes and the peers' environments.

Every contender runs in a worker process of its own (``worker.py``), contextledger and
the raw drivers with the project's Python, each peer with the Python of its own virtual
environment under ``benchmarks/.data/venvs/`` so that its dependency pins cannot clash
with ours. One harness drives them all through the JSON-lines protocol of ``_protocol``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".data" / "venvs"

# peer environment -> the packages it installs (pip requirement strings).
PEER_PACKAGES: dict[str, tuple[str, ...]] = {
    "strands": ("strands-agents",),
    "openai_agents": ("openai-agents[sqlalchemy,redis]", "aiosqlite", "psycopg[binary]"),
    "langgraph": ("langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "psycopg[binary]"),
    "langchain": ("langchain-community", "langchain-core", "sqlalchemy[asyncio]"),
    "pydantic_ai": ("pydantic-ai-slim",),
    "adk": ("google-adk[db]", "aiosqlite"),
}


@dataclass
class Outcome:
    """What one contender gave in one workload: samples, a value, or why not.

    ``samples`` are wall seconds per repetition, ``cpu`` the client CPU seconds of the
    same repetitions (this process's, all threads; a server's CPU is not in it).
    """

    samples: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    value: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    na: str | None = None

    @property
    def ok(self) -> bool:
        return self.na is None


class Worker:
    """One contender's process. A failed start or request marks it n/a with the reason."""

    def __init__(self, python: Path, name: str, log_dir: Path) -> None:
        self.name = name
        self.na: str | None = None
        self.log: IO[bytes] = tempfile.NamedTemporaryFile(  # noqa: SIM115 - the child writes to it
            prefix=f"{name}-", suffix=".log", dir=log_dir, delete=False
        )
        try:
            self.process: subprocess.Popen[str] | None = subprocess.Popen(
                [str(python), str(HERE / "worker.py"), name],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.log,
                text=True,
                bufsize=1,
            )
        except OSError as exc:
            self.process = None
            self.na = f"could not start: {exc}"

    def request(self, **message: Any) -> dict[str, Any]:
        """Send one request and wait for its answer; ``{"na": ...}`` once the worker failed."""
        if self.na is not None:
            return {"na": self.na}
        process = self.process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            line = ""
            self.na = f"worker died: {exc}"
        if not line:
            self.na = self.na or f"worker exited: {self.tail()}"
            return {"na": self.na}
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            self.na = "failed: " + reply["error"].strip().splitlines()[-1][:300]
            print(f"[{self.name}] {reply['error']}", file=sys.stderr)
            return {"na": self.na}
        return reply

    def tail(self) -> str:
        self.log.flush()
        lines = Path(self.log.name).read_text(errors="replace").strip().splitlines()
        return lines[-1][:300] if lines else "no output"

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


def peer_python(env: str, *, install: bool) -> tuple[Path | None, str]:
    """The Python of peer environment ``env``, installing it when asked; or why there is none."""
    venv = VENVS / env
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = "\n".join(PEER_PACKAGES[env])
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python, ""
    if not install:
        return None, "not installed (run scripts/bench without --no-install)"
    print(f"installing {env} into {venv} ...", file=sys.stderr, flush=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES[env]],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
            return None, "could not be installed: " + (lines[-1][:300] if lines else f"exit {done.returncode}")
    stamp.write_text(wanted)
    return python, ""


def peer_versions(python: Path, packages: list[str]) -> dict[str, str]:
    """Installed versions of ``packages`` in the environment of ``python``."""
    code = (
        "import json, sys\nfrom importlib.metadata import version, PackageNotFoundError\nout = {}\n"
        "for p in sys.argv[1:]:\n    try: out[p] = version(p)\n    except PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run([str(python), "-c", code, *packages], capture_output=True, text=True, check=False)
    try:
        found: dict[str, str] = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {}
    return found
