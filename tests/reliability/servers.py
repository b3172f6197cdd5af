"""Durable servers the reliability suite can crash and restart on the same port and data.

Unlike the suite's shared throwaway servers (durability off, for speed), these run as a
production server would: PostgreSQL with ``fsync=on`` and ``synchronous_commit=on``,
Redis with ``appendonly yes`` and ``appendfsync always``. ``crash()`` sends SIGKILL to
the server (no shutdown, no flush); ``start()`` brings it back on the same port and data
directory, so what survives is what the server had made durable.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["DurablePostgres", "DurableRedis", "free_port", "postgres_binaries", "redis_binary"]


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def postgres_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, if installed."""
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(directory) / "initdb").is_file():
            return Path(directory)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def redis_binary() -> str | None:
    """The ``redis-server`` binary, if installed."""
    return shutil.which("redis-server")


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class DurablePostgres:
    """A PostgreSQL server with fsync on, crashable with SIGKILL and restartable."""

    def __init__(self) -> None:
        """Initialise a data directory (the server is not started yet)."""
        binaries = postgres_binaries()
        if binaries is None:
            raise RuntimeError("no PostgreSQL binaries")
        self._bin = binaries
        self.directory = Path(tempfile.mkdtemp(prefix="cl-reliability-pg-"))
        self._user: str | None = None
        if os.geteuid() == 0:  # initdb refuses to run as root
            self._user = "postgres"
            entry = pwd.getpwnam("postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        initdb = [str(binaries / "initdb"), "-D", str(self.directory / "data"), "-U", "postgres", "-A", "trust"]
        initdb += ["-E", "UTF8", "--locale=C"]
        subprocess.run(
            initdb,
            user=self._user,
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """URL of the ``postgres`` database."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start (or restart after a crash: the server replays its WAL) and wait until it answers."""
        argv = [str(self._bin / "postgres"), "-D", str(self.directory / "data"), "-p", str(self.port)]
        settings = ["listen_addresses=127.0.0.1", f"unix_socket_directories={self.directory}", "fsync=on"]
        settings += ["synchronous_commit=on", "full_page_writes=on", "max_connections=100"]
        for setting in settings:
            argv += ["-c", setting]
        with open(self.directory / "postgres.log", "ab") as log:
            self.process = subprocess.Popen(
                argv,
                user=self._user,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait(lambda: self._ready(), 60, "PostgreSQL")

    def _ready(self) -> bool:
        import psycopg

        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited: {self.log()[-2000:]}")
        try:
            with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", connect_timeout=1):
                return True
        except psycopg.OperationalError:
            return False

    def crash(self) -> None:
        """SIGKILL the postmaster and every backend of its process group (no shutdown)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        # Backends of a killed postmaster exit by themselves; wait until the port is free.
        _wait(lambda: not _answers(self.port), 30, "PostgreSQL shutdown")
        self._remove_stale_pid()

    def stop(self) -> None:
        """A clean fast shutdown (SIGINT), as an operator's restart does."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)

    def _remove_stale_pid(self) -> None:
        # A postmaster killed with SIGKILL leaves postmaster.pid; a restart then waits for
        # the old shared memory to go, which it does once every backend has exited.
        time.sleep(0.2)

    def log(self) -> str:
        """The server log."""
        path = self.directory / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        """Stop the server and remove its data directory."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


class DurableRedis:
    """A Redis server with AOF ``appendfsync always``, crashable and restartable."""

    def __init__(self, *, password: str | None = None) -> None:
        """Pick a port and a data directory (the server is not started yet)."""
        binary = redis_binary()
        if binary is None:
            raise RuntimeError("no redis-server binary")
        self._binary = binary
        self.directory = Path(tempfile.mkdtemp(prefix="cl-reliability-redis-"))
        self.port = free_port()
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """URL of database 0."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart: the AOF is replayed) and wait until it answers."""
        argv = [self._binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)]
        argv += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
        if self.password:
            argv += ["--requirepass", self.password]
        with open(self.directory / "redis.log", "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: self._ready(), 30, "Redis")

    def _ready(self) -> bool:
        from redis import Redis
        from redis.exceptions import BusyLoadingError, ConnectionError

        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError("redis-server exited")
        try:
            return bool(Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=1).ping())
        except (ConnectionError, BusyLoadingError):
            return False

    def crash(self) -> None:
        """SIGKILL the server."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.crash()
        shutil.rmtree(self.directory, ignore_errors=True)
