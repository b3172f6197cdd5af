"""A throwaway PostgreSQL primary with a streaming standby, from the local binaries.

:func:`start_primary_and_standby` starts a primary (:func:`~tests.plugins.postgres_server.start_postgres`
with replication settings), copies it with ``pg_basebackup -R`` (which writes
``standby.signal`` and ``primary_conninfo``) and starts the copy as a hot standby named
``standby1`` on another free loopback port. With ``synchronous=True`` the primary lists
it in ``synchronous_standby_names`` and commits with ``synchronous_commit=on``: a commit
is acknowledged only once the standby has flushed it -- the PostgreSQL way to the promise
that ``durability="replicated"`` makes on Redis.

:meth:`PostgresPair.kill_primary` SIGKILLs the primary's whole process group (a killed
postmaster alone would leave its backends serving); :meth:`PostgresPair.promote` promotes
the standby (``pg_promote()``). Both servers stop with :meth:`PostgresPair.stop`, by pid.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from contextledger.errors import StoreUnavailable
from tests.plugins.postgres_server import (
    _SUPERUSER,
    PostgresServer,
    _demote,
    _free_port,
    _wait_ready,
    find_binaries,
    start_postgres,
)

__all__ = ["STANDBY_NAME", "PostgresPair", "start_primary_and_standby"]

logger = logging.getLogger(__name__)

STANDBY_NAME = "standby1"


@dataclass
class PostgresPair:
    """A primary and its streaming standby.

    Attributes:
        primary: The primary server.
        standby: The standby (read-only until promoted).
    """

    primary: PostgresServer
    standby: PostgresServer

    def url(self, database: str, **query: str) -> str:
        """A URL that names both servers, the writable one chosen by libpq (``target_session_attrs``)."""
        hosts = "&".join(f"host={s.host}:{s.port}" for s in (self.primary, self.standby))
        extra = "".join(f"&{name}={value}" for name, value in query.items())
        return f"postgresql+psycopg://{_SUPERUSER}@/{database}?{hosts}&target_session_attrs=read-write{extra}"

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster and every backend (its process group)."""
        os.killpg(self.primary.process.pid, signal.SIGKILL)
        self.primary.process.wait(timeout=10)
        logger.info("pid=<%d> | killed the primary", self.primary.process.pid)

    def promote(self, *, timeout: float = 60) -> None:
        """Promote the standby and wait until it accepts writes."""
        import psycopg

        with psycopg.connect(
            host=self.standby.host, port=self.standby.port, user=_SUPERUSER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute("SELECT pg_promote(wait => true, wait_seconds => %s)", (int(timeout),))
            deadline = time.monotonic() + timeout
            while conn.execute("SELECT pg_is_in_recovery()").fetchone() != (False,):
                if time.monotonic() > deadline:
                    raise StoreUnavailable(f"the standby was not promoted within {timeout:.0f}s")
                time.sleep(0.1)

    def wait_replayed(self, *, timeout: float = 60) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        import psycopg

        def connect(server: PostgresServer) -> psycopg.Connection[tuple[object, ...]]:
            return psycopg.connect(
                host=server.host, port=server.port, user=_SUPERUSER, dbname="postgres", autocommit=True
            )

        with connect(self.primary) as primary, connect(self.standby) as standby:
            row = primary.execute("SELECT pg_current_wal_lsn()").fetchone()
            assert row is not None
            deadline = time.monotonic() + timeout
            while True:
                done = standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)).fetchone()
                if done == (True,):
                    return
                if time.monotonic() > deadline:
                    raise StoreUnavailable(f"the standby did not replay the primary's WAL within {timeout:.0f}s")
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop both servers (by pid) and remove their directories; idempotent."""
        self.standby.stop()
        self.primary.stop()


_REPLICATION = {"wal_level": "replica", "max_wal_senders": "5", "hot_standby": "on"}


def start_primary_and_standby(
    *, synchronous: bool = False, standby_settings: Mapping[str, str] | None = None, timeout: float = 90
) -> PostgresPair:
    """Start a primary and a streaming hot standby of it; see the module docstring.

    Args:
        synchronous: Commit only once the standby has flushed (``synchronous_standby_names``).
        standby_settings: More server settings for the standby (e.g. ``log_statement=all``).
        timeout: Seconds each server may take to start, and the standby to stream.

    Raises:
        StoreUnavailable: A binary is missing or a server did not start or stream in time.
    """
    binaries = find_binaries()
    if binaries is None or not (binaries / "pg_basebackup").is_file():
        raise StoreUnavailable("no PostgreSQL binaries (initdb, postgres, pg_basebackup) were found")
    settings = dict(_REPLICATION)
    if synchronous:
        settings |= {"synchronous_standby_names": STANDBY_NAME, "synchronous_commit": "on"}
    primary = start_postgres(timeout=timeout, settings=settings)
    try:
        standby = _start_standby(binaries, primary, standby_settings or {}, timeout=timeout)
    except BaseException:
        primary.stop()
        raise
    pair = PostgresPair(primary, standby)
    try:
        _wait_streaming(pair, synchronous=synchronous, timeout=timeout)
    except BaseException:
        pair.stop()
        raise
    return pair


def _start_standby(
    binaries: Path, primary: PostgresServer, settings: Mapping[str, str], *, timeout: float
) -> PostgresServer:
    user, uid, gid = _demote()
    directory = primary.directory / "standby"
    data = directory / "data"
    directory.mkdir(parents=True, exist_ok=True)
    if uid is not None and gid is not None:
        os.chown(directory, uid, gid)
    try:
        subprocess.run(
            [
                *(str(binaries / "pg_basebackup"), "-h", primary.host, "-p", str(primary.port), "-U", _SUPERUSER),
                *("-D", str(data), "-R", "-X", "stream", "--no-sync"),
            ],
            user=user,
            check=True,
            capture_output=True,
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = exc.stderr.decode(errors="replace").strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        raise StoreUnavailable(f"pg_basebackup failed: {detail}") from exc
    port = _free_port()
    flags = [part for name, value in settings.items() for part in ("-c", f"{name}={value}")]
    log = open(directory / "postgres.log", "ab")  # noqa: SIM115 - the child keeps it open
    try:
        process = subprocess.Popen(
            [
                *(str(binaries / "postgres"), "-D", str(data), "-p", str(port)),
                *("-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={directory}"),
                *("-c", f"cluster_name={STANDBY_NAME}", "-c", "max_connections=200", *flags),
            ],
            user=user,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()
    standby = PostgresServer(primary.host, port, _SUPERUSER, directory, process)
    try:
        _wait_ready(standby, timeout)
    except BaseException:
        standby.stop()
        raise
    logger.info("port=<%d>, primary_port=<%d> | started a streaming standby", port, primary.port)
    return standby


def _wait_streaming(pair: PostgresPair, *, synchronous: bool, timeout: float) -> None:
    import psycopg

    wanted = "sync" if synchronous else "async"
    deadline = time.monotonic() + timeout
    with psycopg.connect(
        host=pair.primary.host, port=pair.primary.port, user=_SUPERUSER, dbname="postgres", autocommit=True
    ) as conn:
        while True:
            row = conn.execute(
                "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s", (STANDBY_NAME,)
            ).fetchone()
            if row == ("streaming", wanted):
                return
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"the standby is not streaming ({wanted}) after {timeout:.0f}s: {row}")
            time.sleep(0.1)
