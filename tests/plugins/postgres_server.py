"""A throwaway PostgreSQL server started from the local binaries, for tests and benchmarks.

:func:`start_postgres` runs ``initdb`` into a temporary directory and starts
``postgres`` on a free loopback port with durability off (fsync, synchronous commit
and full-page writes), then waits until it accepts connections. The server is this
process's child; :meth:`PostgresServer.stop` shuts it down by its pid and removes the
directory. PostgreSQL refuses to run as root, so under root both run as the
``postgres`` system user. Only 127.0.0.1 is listened on; Unix sockets stay in the
temporary directory.

Example::

    with start_postgres() as server:
        store = SQLStore.from_url(server.url_for("postgres"), auto_upgrade=True)
"""

from __future__ import annotations

import atexit
import glob
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from contextledger.errors import StoreUnavailable

__all__ = ["PostgresServer", "find_binaries", "start_postgres"]

logger = logging.getLogger(__name__)

_SUPERUSER = "postgres"


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``: the newest Debian-style install, else ``PATH``."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    for directory in candidates:
        if (Path(directory) / "initdb").is_file() and (Path(directory) / "postgres").is_file():
            return Path(directory)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(initdb).parent
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """A running throwaway server; stop it with :meth:`stop` or a ``with`` block.

    Attributes:
        host: Always ``127.0.0.1``.
        port: The port it listens on.
        user: The superuser name (no password; trust authentication on loopback).
        directory: The temporary directory holding the data directory and the log.
    """

    host: str
    port: int
    user: str
    directory: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def url(self) -> str:
        """A psycopg URL of the ``postgres`` maintenance database."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        """A psycopg URL of ``database`` on this server."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    @property
    def log(self) -> str:
        """The server log so far."""
        path = self.directory / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Fast-shut the server down (SIGINT to its pid) and remove its directory; idempotent."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        """Return self."""
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the server."""
        self.stop()


def _demote() -> tuple[str | None, int | None, int | None]:
    """The user to run the server as: ``postgres`` under root, else ourselves."""
    if os.geteuid() != 0:
        return None, None, None
    try:
        entry = pwd.getpwnam(_SUPERUSER)
    except KeyError as exc:
        raise StoreUnavailable("running as root needs a 'postgres' system user to start PostgreSQL") from exc
    return _SUPERUSER, entry.pw_uid, entry.pw_gid


def _wait_ready(server: PostgresServer, timeout: float) -> None:
    import psycopg  # the postgres extra; imported only when a server is started

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = "\n".join(server.log.splitlines()[-5:])
            raise StoreUnavailable(f"PostgreSQL exited with code {server.process.returncode}: {tail}")
        try:
            with psycopg.connect(
                host=server.host, port=server.port, user=server.user, dbname="postgres", connect_timeout=2
            ):
                return
        except psycopg.OperationalError as exc:
            last = exc
            time.sleep(0.1)
    raise StoreUnavailable(f"PostgreSQL on {server.host}:{server.port} did not accept connections: {last}")


_NO_DURABILITY = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def start_postgres(
    *, timeout: float = 60.0, attempts: int = 3, settings: Mapping[str, str] | None = None
) -> PostgresServer:
    """Initialise and start a throwaway server on a free loopback port.

    Args:
        timeout: Seconds to wait for the server to accept connections.
        attempts: Tries with a fresh port (another process may take the free port first).
        settings: Server settings (``-c name=value``) that replace the defaults, e.g.
            ``{"fsync": "on"}`` for a benchmark that wants durable commits.

    Raises:
        StoreUnavailable: No PostgreSQL binaries were found or the server did not start.
    """
    binaries = find_binaries()
    if binaries is None:
        raise StoreUnavailable("no PostgreSQL binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or PATH")
    user, uid, gid = _demote()
    directory = Path(tempfile.mkdtemp(prefix="contextledger-pg-"))
    data = directory / "data"
    if uid is not None and gid is not None:
        os.chown(directory, uid, gid)
    try:
        subprocess.run(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                _SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            user=user,
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        detail = exc.stderr.decode(errors="replace").strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        raise StoreUnavailable(f"initdb failed: {detail}") from exc
    merged = {**_NO_DURABILITY, **(settings or {})}
    flags = [part for name, value in merged.items() for part in ("-c", f"{name}={value}")]
    error: StoreUnavailable | None = None
    for _ in range(attempts):
        port = _free_port()
        log = open(directory / "postgres.log", "ab")  # noqa: SIM115 - the child keeps it open
        try:
            process = subprocess.Popen(
                [
                    str(binaries / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={directory}",
                    "-c",
                    "max_connections=200",
                    *flags,
                ],
                user=user,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            shutil.rmtree(directory, ignore_errors=True)
            raise StoreUnavailable(f"could not run postgres: {exc}") from exc
        finally:
            log.close()
        server = PostgresServer("127.0.0.1", port, _SUPERUSER, directory, process)
        try:
            _wait_ready(server, timeout)
        except StoreUnavailable as exc:
            error = exc
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(timeout=30)
            continue
        # A crashed test run still stops the server when the interpreter exits.
        atexit.register(server.stop)
        logger.info("port=<%d>, directory=<%s> | started throwaway PostgreSQL", port, directory)
        return server
    shutil.rmtree(directory, ignore_errors=True)
    assert error is not None
    raise error
