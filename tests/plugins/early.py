"""Slow subprocesses whose output a few tests read, started when collection ends so they overlap other tests.

A test module registers a :class:`Job` at import (:func:`job`): a command that writes
into a scratch directory of its own (the benchmark harness, a documentation build), and
the name of the fixture that hands its result to the tests. When a selected test uses
that fixture, the job starts in the background right after collection -- its own
process, its output in files -- and the fixture waits for it with :meth:`Job.result`;
the tests assert on what it wrote exactly as before. Nothing is
timed; only the waiting overlaps with the tests that run meanwhile (the suite runs on one
core, these jobs use another). A job nobody asked for is never started; one still running
when the session ends (``-x``, an interrupt) gets SIGTERM, which the benchmark harness
turns into its cleanup (servers stopped by pid), then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

_JOBS: list[Job] = []
GRACE = 30.0
"""Seconds a job stopped at the end of the session has to clean up before it is killed."""


@dataclass
class Finished:
    """What a job left: its exit status, its output, and its scratch directory."""

    returncode: int
    stdout: str
    stderr: str
    workdir: Path


@dataclass
class Job:
    """One background command; see :func:`job`."""

    fixture: str
    name: str
    command: Callable[[Path], Sequence[str]]
    cwd: Path | Callable[[Path], Path] | None
    env: Mapping[str, str] | None
    timeout: float
    prepare: Callable[[Path], None] | None = None
    workdir: Path | None = field(default=None, init=False)
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _deadline: float = field(default=0.0, init=False, repr=False)
    _finished: Finished | None = field(default=None, init=False, repr=False)

    def start(self) -> None:
        """Start the command (once) in a fresh scratch directory."""
        if self._process is not None:
            return
        self.workdir = Path(tempfile.mkdtemp(prefix=f"cltest-{self.name}-"))
        if self.prepare is not None:
            self.prepare(self.workdir)
        with open(self.workdir / "stdout.txt", "wb") as out, open(self.workdir / "stderr.txt", "wb") as err:
            self._process = subprocess.Popen(
                list(self.command(self.workdir)),
                cwd=self.cwd(self.workdir) if callable(self.cwd) else self.cwd,
                env=None if self.env is None else dict(self.env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        self._deadline = time.monotonic() + self.timeout

    def result(self) -> Finished:
        """Wait for the command (starting it if collection did not); its timeout counts from its start.

        Raises:
            subprocess.TimeoutExpired: The command ran past its timeout (it is stopped first).
        """
        if self._finished is not None:
            return self._finished
        self.start()
        assert self._process is not None
        assert self.workdir is not None
        try:
            returncode = self._process.wait(timeout=max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        self._finished = Finished(
            returncode,
            (self.workdir / "stdout.txt").read_text(errors="replace"),
            (self.workdir / "stderr.txt").read_text(errors="replace"),
            self.workdir,
        )
        return self._finished

    def stop(self) -> None:
        """Stop the command if it still runs (SIGTERM, then SIGKILL after :data:`GRACE`)."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def clean(self) -> None:
        """Stop the command and remove its scratch directory."""
        self.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def job(
    fixture: str,
    name: str,
    command: Callable[[Path], Sequence[str]],
    *,
    cwd: Path | Callable[[Path], Path] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    prepare: Callable[[Path], None] | None = None,
) -> Job:
    """Register a command whose result the fixture named ``fixture`` returns (from :meth:`Job.result`).

    ``command``, ``prepare`` and a callable ``cwd`` get the job's scratch directory
    (``prepare`` runs before the command, in the pytest process). The command starts after collection when a selected
    test uses ``fixture``, else on the first :meth:`Job.result`.
    """
    registered = Job(fixture, name, command, cwd, env, timeout, prepare)
    _JOBS.append(registered)
    return registered


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the jobs whose fixture a selected test uses."""
    if session.config.option.collectonly:
        return
    used = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    for registered in _JOBS:
        if registered.fixture in used:
            try:
                registered.start()
            except Exception:  # the fixture starts it again, and its test shows the error
                registered.clean()
                registered.workdir = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop what still runs and remove the scratch directories."""
    for registered in _JOBS:
        registered.clean()


def environment(**extra: str) -> dict[str, str]:
    """This process's environment with ``extra`` set."""
    return {**os.environ, **extra}
