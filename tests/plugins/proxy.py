"""A loopback TCP proxy that can lose the reply to one request, for exactly-once tests.

The proxy forwards bytes both ways between a client and a real server. When armed, the
next client packet that a predicate recognises as a commit (``COMMIT`` on PostgreSQL,
the commit script's ``EVALSHA`` on Redis) is handled in one of two ways:

* ``apply=True``: the packet is forwarded, the server runs it and answers, and the proxy
  swallows the answer and cuts both connections -- the server applied the commit, the
  client never hears it. (A reply the predicate ``keep_reply`` accepts, such as Redis'
  ``-NOSCRIPT``, is forwarded and the proxy stays armed: nothing ran.)
* ``apply=False``: the packet is dropped and both connections cut -- the request never
  reached the server.

It can also refuse every connection (an outage) until :meth:`TcpProxy.restore`, and
delay every client packet by ``delay`` seconds (a slow link: each request round trip
then takes at least that long). Loopback only; every socket and thread it opens is closed by :meth:`TcpProxy.close`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["FaultPlan", "TcpProxy"]


@dataclass
class FaultPlan:
    """What the proxies of one store do with the next commits (shared by a cluster's proxies).

    Attributes:
        is_commit: Recognises a client packet that carries a commit.
        keep_reply: A reply to forward anyway (the request did not run); the plan stays armed.
        armed: Commits still to lose.
        apply: Whether a lost commit reaches the server first.
        then_down: After losing a reply, refuse every connection until restored.
        dropped: How many commits were lost so far.
        down: Whether connections are refused now.
    """

    is_commit: Callable[[bytes], bool]
    keep_reply: Callable[[bytes], bool] = lambda _reply: False
    armed: int = 0
    apply: bool = True
    then_down: bool = False
    dropped: int = 0
    down: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    proxies: list[TcpProxy] = field(default_factory=list)

    def arm(self, *, apply: bool = True, times: int = 1, then_down: bool = False) -> None:
        """Lose the next ``times`` commits (see the module docstring)."""
        with self.lock:
            self.armed, self.apply, self.then_down = times, apply, then_down

    def disarm(self) -> None:
        """Forward everything again."""
        with self.lock:
            self.armed = 0

    def take(self, data: bytes) -> bool | None:
        """For a client packet: ``None`` to forward it, else whether to forward it and lose the reply."""
        with self.lock:
            if self.armed <= 0 or not self.is_commit(data):
                return None
            self.armed -= 1
            self.dropped += 1
            return self.apply

    def outage(self) -> None:
        """Refuse every connection and cut the open ones."""
        with self.lock:
            self.down = True
        for proxy in self.proxies:
            proxy.cut_all()

    def restore(self) -> None:
        """Accept connections again."""
        with self.lock:
            self.down = False


class _Pair:
    """One proxied connection: the client side and the server side."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.swallow = False  # lose the next reply
        self.closed = False
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``(host, port)`` under a :class:`FaultPlan` (client packets ``delay`` s late)."""

    def __init__(self, target: tuple[str, int], plan: FaultPlan, *, delay: float = 0.0) -> None:
        self.target = target
        self.plan = plan
        self.delay = delay
        plan.proxies.append(self)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._stopped = False
        self._spawn(self._accept)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self.plan.down or self._stopped:
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
            self._spawn(self._upstream, pair)
            self._spawn(self._downstream, pair)

    def _upstream(self, pair: _Pair) -> None:
        """Client -> server, where a commit is recognised."""
        try:
            while data := pair.client.recv(65536):
                if self.delay:
                    time.sleep(self.delay)
                verdict = self.plan.take(data)
                if verdict is None:
                    pair.server.sendall(data)
                    continue
                if not verdict:  # the request never reaches the server
                    self._lost(pair)
                    return
                pair.swallow = True
                pair.server.sendall(data)
        except OSError:
            pass
        pair.close()

    def _downstream(self, pair: _Pair) -> None:
        """Server -> client, where a swallowed reply is lost."""
        try:
            while data := pair.server.recv(65536):
                if pair.swallow:
                    if self.plan.keep_reply(data):
                        pair.swallow = False
                        with self.plan.lock:  # nothing ran: stay armed for the retry
                            self.plan.armed += 1
                            self.plan.dropped -= 1
                        pair.client.sendall(data)
                        continue
                    self._lost(pair)
                    return
                pair.client.sendall(data)
        except OSError:
            pass
        pair.close()

    def _lost(self, pair: _Pair) -> None:
        # The outage starts before the client sees the cut: otherwise a busy machine lets
        # the client reconnect (and read back the outcome) before the proxy refuses it.
        if self.plan.then_down:
            self.plan.outage()
        pair.close()

    def cut_all(self) -> None:
        """Close every open connection."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()

    def close(self) -> None:
        """Stop listening, cut every connection and join the threads."""
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below; close() alone would not
        self._listener.close()
        self.cut_all()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)
