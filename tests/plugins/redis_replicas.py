"""Throwaway Redis deployments with replicas, from the local binaries, for failover tests.

* :func:`start_replicated_cluster` -- a Redis Cluster of 3 primaries and one replica
  each, formed by ``redis-cli --cluster create ... --cluster-replicas 1`` on free
  loopback ports, with a small ``cluster-node-timeout`` so a killed primary's replica
  is promoted within seconds.
* :func:`start_primary_with_replica` -- a standalone primary and one replica of it.

Every node is a child process of this one, known by its pid and port, so a test can
SIGKILL exactly one node (:meth:`ReplicatedRedis.kill`) and :meth:`ReplicatedRedis.stop`
stops only what was started. Waits are bounded; a deployment that does not form raises
:class:`~contextledger.errors.StoreUnavailable`.
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from redis import Redis
from redis.exceptions import RedisError

from contextledger.errors import StoreUnavailable
from tests.plugins.redis_server import CLUSTER_SLOTS, _cleanup, _Process, _spawn

__all__ = ["NODE_TIMEOUT_MS", "ReplicatedRedis", "start_primary_with_replica", "start_replicated_cluster"]

logger = logging.getLogger(__name__)

NODE_TIMEOUT_MS = 2000
"""``cluster-node-timeout``: a primary silent this long is failed over (small, for tests; not too small
on a loaded machine, where a slow node would otherwise be failed over without being killed)."""


@dataclass
class ReplicatedRedis:
    """Nodes of a replicated deployment, by port.

    Attributes:
        url: ``redis+cluster://...`` (cluster) or ``redis://.../0`` (the standalone primary).
        processes: Port -> the node's process.
    """

    url: str
    processes: dict[int, _Process]
    _stop: Callable[[], None] = field(repr=False)

    def client(self, port: int) -> Redis:
        """A plain client of one node (decoded replies, short timeouts); close it."""
        return Redis(host="127.0.0.1", port=port, socket_timeout=5, socket_connect_timeout=2, decode_responses=True)

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` (by its pid) and reap it."""
        process = self.processes[port]
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait(timeout=10)
        logger.info("pid=<%d>, port=<%d> | killed redis-server", process.popen.pid, port)

    def restart(self, port: int, *, timeout: float = 60) -> None:
        """Start the killed node on ``port`` again, with its cluster config: it rejoins as a replica.

        Returns once it is an in-sync replica (a node with no data of its own to keep).

        Raises:
            StoreUnavailable: It did not rejoin in time.
        """
        old = self.processes[port]
        popen = subprocess.Popen(
            old.popen.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.processes[port] = _Process(popen=popen, port=port, log=old.log)
        logger.info("pid=<%d>, port=<%d> | restarted redis-server", popen.pid, port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with self.client(port) as client:
                    info = cast(dict[str, Any], client.info("replication"))
                if info.get("role") == "slave" and info.get("master_link_status") == "up":
                    return
            except RedisError:
                pass
            time.sleep(0.1)
        raise StoreUnavailable(f"the node on port {port} did not rejoin as a replica within {timeout:.0f}s")

    def cut_off(self, primary: int, replica: int) -> None:
        """Make ``replica`` fall behind ``primary``: pause it, then have the primary drop its link.

        What the primary acknowledges from now on reaches no replica (a paused replica
        would still find what was already sent in its socket buffer; a dropped link has
        nothing). :meth:`resume` the replica afterwards.
        """
        self.pause(replica)
        with self.client(primary) as client:
            _command(client, "CLIENT", "KILL", "TYPE", "replica")

    def pause(self, port: int) -> None:
        """SIGSTOP the node on ``port``: it holds its connections but answers nothing."""
        self.processes[port].popen.send_signal(signal.SIGSTOP)

    def resume(self, port: int) -> None:
        """SIGCONT a paused node."""
        self.processes[port].popen.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stop every node still running (a paused one is resumed first) and remove the directory; idempotent."""
        for process in self.processes.values():
            if process.popen.poll() is None:
                process.popen.send_signal(signal.SIGCONT)
                # a node restarted after its kill is only here, not in the start-up list
                process.stop()
        stop, self._stop = self._stop, lambda: None
        stop()

    def primary_of(self, key: str, *, timeout: float = 30) -> int:
        """The port of the primary that owns ``key``'s slot now (asked of the live nodes)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for port, process in self.processes.items():
                if process.popen.poll() is not None:
                    continue
                with self.client(port) as client:
                    try:
                        slot = int(_command(client, "CLUSTER", "KEYSLOT", key))
                        for first, last, owner, *_ in _command(client, "CLUSTER", "SLOTS"):
                            if int(first) <= slot <= int(last) and self._alive(int(owner[1])):
                                return int(owner[1])
                    except RedisError:
                        continue
            time.sleep(0.1)
        raise StoreUnavailable(f"no live primary owns the slot of {key!r} after {timeout:.0f}s")

    def replicas_of(self, port: int) -> list[int]:
        """Ports of the replicas attached to the primary on ``port`` (``INFO replication``)."""
        with self.client(port) as client:
            info = cast(dict[str, Any], client.info("replication"))
        return [int(value["port"]) for name, value in info.items() if name.startswith("slave") and "port" in value]

    def wait_promoted(self, old: int, key: str, *, timeout: float = 60) -> int:
        """Wait until a node other than ``old`` owns ``key``'s slot and the cluster is ``ok``; its port."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                port = self.primary_of(key, timeout=max(0.1, deadline - time.monotonic()))
            except StoreUnavailable:
                break
            if port != old and self._cluster_ok(port):
                return port
            time.sleep(0.2)
        raise StoreUnavailable(f"no replica of the primary on port {old} was promoted within {timeout:.0f}s")

    def _alive(self, port: int) -> bool:
        process = self.processes.get(port)
        return process is not None and process.popen.poll() is None

    def _cluster_ok(self, port: int) -> bool:
        with self.client(port) as client:
            try:
                return str(client.cluster("INFO").get("cluster_state")) == "ok"
            except RedisError:
                return False


def _command(client: Redis, *args: Any) -> Any:
    return cast(Any, client).execute_command(*args)


def _redis_cli() -> str:
    found = shutil.which("redis-cli")
    if found is None:
        raise StoreUnavailable("redis-cli is not installed (it forms the cluster)")
    return found


def start_replicated_cluster(primaries: int = 3, *, timeout: float = 60) -> ReplicatedRedis:
    """Start ``primaries`` primaries and one replica each, joined by ``redis-cli --cluster create``.

    Returns once every node reports ``cluster_state:ok``, all slots are covered and every
    primary has its replica attached and in sync.

    Raises:
        StoreUnavailable: A binary is missing, a node did not start or the cluster did not form in time.
    """
    cli = _redis_cli()
    workdir = Path(tempfile.mkdtemp(prefix="contextledger-redis-replicas-"))
    processes: list[_Process] = []
    stop = _cleanup(processes, workdir)
    try:
        extra = ("--cluster-node-timeout", str(NODE_TIMEOUT_MS))
        for _ in range(primaries * 2):
            processes.append(_spawn(workdir, cluster=True, extra=extra))
        nodes = [f"127.0.0.1:{p.port}" for p in processes]
        done = subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "1", "--cluster-yes"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            detail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-3:]
            raise StoreUnavailable(f"redis-cli --cluster create failed: {' / '.join(detail)}")
        deployment = ReplicatedRedis(
            url=f"redis+cluster://127.0.0.1:{processes[0].port}",
            processes={p.port: p for p in processes},
            _stop=stop,
        )
        _wait_formed(deployment, primaries, timeout=timeout)
    except BaseException:
        stop()
        raise
    return deployment


def _wait_formed(deployment: ReplicatedRedis, primaries: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "not checked"
    while time.monotonic() < deadline:
        try:
            if _formed(deployment, primaries):
                return
            last = "not every node is ok, covered and replicated"
        except RedisError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise StoreUnavailable(f"the replicated Redis Cluster did not form within {timeout:.0f}s: {last}")


def _formed(deployment: ReplicatedRedis, primaries: int) -> bool:
    owners: set[int] = set()
    for port in deployment.processes:
        with deployment.client(port) as client:
            info = client.cluster("INFO")
            if str(info.get("cluster_state")) != "ok" or int(info.get("cluster_known_nodes", 0)) != 2 * primaries:
                return False
            ranges = _command(client, "CLUSTER", "SLOTS")
            if sum(int(r[1]) - int(r[0]) + 1 for r in ranges) != CLUSTER_SLOTS or any(len(r) < 4 for r in ranges):
                return False
            owners |= {int(r[2][1]) for r in ranges}
    return len(owners) == primaries and all(_in_sync(deployment, port) for port in owners)


def _in_sync(deployment: ReplicatedRedis, primary: int) -> bool:
    with deployment.client(primary) as client:
        info = cast(dict[str, Any], client.info("replication"))
    return any(
        name.startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
        for name, value in info.items()
    )


def start_primary_with_replica(*, timeout: float = 30) -> ReplicatedRedis:
    """A standalone primary and one replica of it (``--replicaof``), in sync on return.

    Raises:
        StoreUnavailable: A node did not start or the replica did not sync in time.
    """
    workdir = Path(tempfile.mkdtemp(prefix="contextledger-redis-replica-"))
    processes: list[_Process] = []
    stop = _cleanup(processes, workdir)
    try:
        primary = _spawn(workdir, cluster=False)
        processes.append(primary)
        processes.append(_spawn(workdir, cluster=False, extra=("--replicaof", "127.0.0.1", str(primary.port))))
        deployment = ReplicatedRedis(
            url=f"redis://127.0.0.1:{primary.port}/0", processes={p.port: p for p in processes}, _stop=stop
        )
        deadline = time.monotonic() + timeout
        while not _in_sync(deployment, primary.port):
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"the replica did not sync with its primary within {timeout:.0f}s")
            time.sleep(0.1)
    except BaseException:
        stop()
        raise
    return deployment
