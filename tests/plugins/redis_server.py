"""Throwaway Redis servers for tests: one standalone server, or a small Redis Cluster.

Where the server comes from, in order:

1. the URL in ``CONTEXTLEDGER_TEST_REDIS_URL`` / ``CONTEXTLEDGER_TEST_REDIS_CLUSTER_URL``
   (a server you run yourself; nothing is started or stopped);
2. a container, when a Docker engine answers (testcontainers);
3. ``redis-server`` from the local binaries, on free loopback ports, without
   persistence, in a temporary directory.

Every function here raises :class:`~contextledger.errors.StoreUnavailable` with the
reason when no server can be had; a test fixture turns that into a failure (under CI)
or a skip. Call :meth:`RedisServer.stop` when done: it stops exactly the processes or
containers that were started, by pid or container id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import quote

from redis import Redis
from redis.exceptions import RedisError

from contextledger.errors import StoreUnavailable

__all__ = [
    "CLUSTER_URL_ENV",
    "URL_ENV",
    "RedisServer",
    "docker_available",
    "redis_cluster",
    "redis_server",
    "start_local_cluster",
    "start_local_redis",
]

logger = logging.getLogger(__name__)

URL_ENV = "CONTEXTLEDGER_TEST_REDIS_URL"
CLUSTER_URL_ENV = "CONTEXTLEDGER_TEST_REDIS_CLUSTER_URL"
CLUSTER_SLOTS = 16384
_BUS_PORT_OFFSET = 10000  # Redis Cluster's node-to-node bus listens on port + 10000
_DOCKER_IMAGE = "redis:7"


@dataclass
class RedisServer:
    """A running Redis (or cluster) reachable at :attr:`url`.

    Attributes:
        url: ``redis://127.0.0.1:<port>/0`` or ``redis+cluster://127.0.0.1:<port>``.
        source: ``env``, ``docker`` or ``local``.
        pids: Processes started for it (empty for ``env`` and ``docker``).
    """

    url: str
    source: Literal["env", "docker", "local"]
    pids: tuple[int, ...] = ()
    _stop: Callable[[], None] = field(default=lambda: None, repr=False)

    def stop(self) -> None:
        """Stop what was started for this server (nothing for ``env``); idempotent."""
        stop, self._stop = self._stop, lambda: None
        stop()


# -- discovery ---------------------------------------------------------------------------


def docker_available() -> bool:
    """Whether a Docker engine answers (``docker info`` succeeds)."""
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def redis_server() -> RedisServer:
    """A standalone Redis: the environment's, a container's or a local one.

    Raises:
        StoreUnavailable: None of them could be had; the message says why.
    """
    url = os.environ.get(URL_ENV)
    if url:
        _wait_ping(url, None, timeout=10)
        return RedisServer(url=url, source="env")
    if docker_available():
        return _docker_redis()
    return start_local_redis()


def redis_cluster(nodes: int = 3) -> RedisServer:
    """A Redis Cluster of ``nodes`` masters: the environment's, a container's or local.

    Raises:
        StoreUnavailable: None of them could be had; the message says why.
    """
    url = os.environ.get(CLUSTER_URL_ENV)
    if url:
        scheme, _, rest = url.partition("://")
        return RedisServer(url=url if scheme.endswith("+cluster") else f"{scheme}+cluster://{rest}", source="env")
    if docker_available():
        return _docker_cluster(nodes)
    return start_local_cluster(nodes)


# -- local binaries ----------------------------------------------------------------------


def _binary() -> str:
    found = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/local/bin/redis-server") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise StoreUnavailable(
            f"redis-server is not installed (and neither {URL_ENV} nor a Docker engine is available)"
        )
    return found


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port(*, cluster: bool = False) -> int:
    """A loopback port that is free now (and, for a cluster node, whose bus port is too)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if not cluster:
            return port
        if port + _BUS_PORT_OFFSET <= 65535 and _port_free(port + _BUS_PORT_OFFSET):
            return port
    raise StoreUnavailable("found no free loopback port for redis-server")


@dataclass
class _Process:
    popen: subprocess.Popen[bytes]
    port: int
    log: Path

    def tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)


def _spawn(
    workdir: Path, *, cluster: bool, extra: Sequence[str] = (), auth: str | None = None, attempts: int = 3
) -> _Process:
    """Start one redis-server on a free loopback port and wait until it answers PING."""
    binary = _binary()
    reason = "not started"
    for _ in range(attempts):
        port = _free_port(cluster=cluster)
        log = workdir / f"redis-{port}.log"
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(workdir), "--daemonize", "no", "--logfile", str(log)]
        if cluster:
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
            argv += ["--cluster-node-timeout", "5000"]
        argv += list(extra)
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        process = _Process(popen=popen, port=port, log=log)
        try:
            _wait_ping(f"redis://127.0.0.1:{port}/0", process, timeout=15, password=auth)
        except StoreUnavailable as exc:
            reason = str(exc)
            process.stop()  # another process may have taken the port: try a new one
            continue
        logger.info("pid=<%d>, port=<%d>, cluster=<%s> | started redis-server", popen.pid, port, cluster)
        return process
    raise StoreUnavailable(f"redis-server did not start: {reason}")


def _wait_ping(url: str, process: _Process | None, *, timeout: float, password: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process is not None and process.popen.poll() is not None:
            raise StoreUnavailable(f"redis-server exited with {process.popen.returncode}: {process.tail()}")
        client = Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2, password=password)
        try:
            client.ping()
            return
        except RedisError as exc:
            last = str(exc)
        finally:
            client.close()
        time.sleep(0.05)
    raise StoreUnavailable(f"no Redis answered at {url} within {timeout:.0f}s: {last}")


def _cleanup(processes: list[_Process], workdir: Path) -> Callable[[], None]:
    def stop() -> None:
        for process in processes:
            process.stop()
            logger.info("pid=<%d>, port=<%d> | stopped redis-server", process.popen.pid, process.port)
        shutil.rmtree(workdir, ignore_errors=True)

    return stop


def start_local_redis(extra_args: Sequence[str] = (), *, password: str | None = None) -> RedisServer:
    """Start ``redis-server`` on a free loopback port (no persistence, temporary dir).

    Args:
        extra_args: More ``redis-server`` options, e.g. ``("--maxmemory", "2mb")``.
        password: Require this password (``--requirepass``); it is part of :attr:`RedisServer.url`.

    Raises:
        StoreUnavailable: The binary is missing or the server did not answer.
    """
    workdir = Path(tempfile.mkdtemp(prefix="contextledger-redis-"))
    try:
        extra = [*extra_args, *(("--requirepass", password) if password else ())]
        process = _spawn(workdir, cluster=False, extra=extra, auth=password)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    auth = f":{quote(password, safe='')}@" if password else ""
    return RedisServer(
        url=f"redis://{auth}127.0.0.1:{process.port}/0",
        source="local",
        pids=(process.popen.pid,),
        _stop=_cleanup([process], workdir),
    )


def start_local_cluster(nodes: int = 3, *, timeout: float = 30) -> RedisServer:
    """Start ``nodes`` cluster-enabled masters on free loopback ports and join them.

    Slots are split evenly (``CLUSTER ADDSLOTSRANGE``), the nodes meet, and this returns
    once every node reports ``cluster_state:ok`` and knows all the others.

    Raises:
        StoreUnavailable: A node did not start or the cluster did not become ready.
    """
    if nodes < 1:
        raise StoreUnavailable("a cluster needs at least one node")
    workdir = Path(tempfile.mkdtemp(prefix="contextledger-redis-cluster-"))
    processes: list[_Process] = []
    stop = _cleanup(processes, workdir)
    try:
        for _ in range(nodes):
            processes.append(_spawn(workdir, cluster=True))
        _form_cluster([p.port for p in processes], timeout=timeout)
    except BaseException:
        stop()
        raise
    return RedisServer(
        url=f"redis+cluster://127.0.0.1:{processes[0].port}",
        source="local",
        pids=tuple(p.popen.pid for p in processes),
        _stop=stop,
    )


def _command(client: Redis, *args: Any) -> Any:
    # redis-py leaves execute_command untyped
    return cast(Any, client).execute_command(*args)


def _form_cluster(ports: list[int], *, timeout: float) -> None:
    clients = [Redis(host="127.0.0.1", port=port, socket_timeout=5, decode_responses=True) for port in ports]
    try:
        step = CLUSTER_SLOTS // len(ports)
        for i, client in enumerate(clients):
            first = i * step
            last = CLUSTER_SLOTS - 1 if i == len(ports) - 1 else first + step - 1
            # distinct config epochs up front, so the nodes need not resolve a collision
            _command(client, "CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            _command(client, "CLUSTER", "ADDSLOTSRANGE", first, last)
        for port in ports[1:]:
            _command(clients[0], "CLUSTER", "MEET", "127.0.0.1", port)
        _wait_cluster_ready(clients, timeout=timeout)
    except RedisError as exc:
        raise StoreUnavailable(f"Redis Cluster on ports {ports} did not form: {exc}") from exc
    finally:
        for client in clients:
            client.close()


def _cluster_ready(client: Redis, nodes: int) -> bool:
    info: dict[str, Any] = client.cluster("INFO")
    if str(info.get("cluster_state")) != "ok" or int(info.get("cluster_known_nodes", 0)) != nodes:
        return False
    covered = sum(int(r[1]) - int(r[0]) + 1 for r in _command(client, "CLUSTER", "SLOTS"))
    return covered == CLUSTER_SLOTS


def _wait_cluster_ready(clients: list[Redis], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_cluster_ready(c, len(clients)) for c in clients):
            return
        time.sleep(0.1)
    raise StoreUnavailable(f"Redis Cluster was not ready within {timeout:.0f}s")


# -- containers --------------------------------------------------------------------------


@contextlib.contextmanager
def _docker_errors(what: str) -> Iterator[None]:
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:  # testcontainers and the Docker SDK raise many unrelated types
        raise StoreUnavailable(f"could not start {what} in Docker: {exc}") from exc


def _docker_redis() -> RedisServer:
    try:
        from testcontainers.community.redis import RedisContainer
    except ImportError:  # testcontainers before the community split
        from testcontainers.redis import RedisContainer

    with _docker_errors("Redis"):
        container = RedisContainer(_DOCKER_IMAGE)
        container.start()
        try:
            host = container.get_container_host_ip()
            port = int(container.get_exposed_port(container.port))
            url = f"redis://{host}:{port}/0"
            _wait_ping(url, None, timeout=30)
        except BaseException:
            container.stop()
            raise
    return RedisServer(url=url, source="docker", _stop=container.stop)


def _docker_cluster(nodes: int) -> RedisServer:
    """Cluster nodes in one container on the host network.

    Cluster nodes announce their own addresses to clients, so a port-mapped container
    would hand out addresses the host cannot reach; on the host network the nodes listen
    on free loopback ports of the host instead.
    """
    from testcontainers.core.container import DockerContainer

    ports = [_free_port(cluster=True) for _ in range(nodes)]
    starts = "; ".join(
        f"redis-server --port {p} --bind 127.0.0.1 --save '' --appendonly no --daemonize yes"
        f" --cluster-enabled yes --cluster-config-file nodes-{p}.conf --dir /tmp"
        for p in ports
    )
    script = f"{starts}; sleep infinity"
    with _docker_errors("a Redis Cluster"):
        container = DockerContainer(_DOCKER_IMAGE).with_kwargs(network_mode="host")
        container.with_command(["sh", "-c", script])
        container.start()
        try:
            for port in ports:
                _wait_ping(f"redis://127.0.0.1:{port}/0", None, timeout=30)
            _form_cluster(ports, timeout=30)
        except BaseException:
            container.stop()
            raise
    return RedisServer(url=f"redis+cluster://127.0.0.1:{ports[0]}", source="docker", _stop=container.stop)
