"""Reaching Redis: opening the client, and translating its errors at the boundary.

:func:`connect` opens a ``redis.Redis`` or ``redis.cluster.RedisCluster`` from a ledger
URL (parsed and masked by :mod:`contextledger.stores.urls`) and checks that it answers;
:func:`translated` turns every redis-py error raised inside it into the library's
errors: :class:`~contextledger.errors.StoreUnavailable` when the server cannot be
reached, :class:`~contextledger.errors.StoreError` otherwise, chained to the driver's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import redis
from redis import Redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    ClusterDownError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contextledger.errors import (
    ConfigurationError,
    InvalidLedgerURL,
    StoreError,
    StoreUnavailable,
)
from contextledger.stores.urls import mask, mask_text, parse_redis

__all__ = [
    "DRIVER_ERRORS",
    "IDENTITY_OPTIONS",
    "UNAVAILABLE",
    "RedisClient",
    "connect",
    "identity",
    "mask_password",
    "one_line",
    "translated",
    "translation",
]

logger = logging.getLogger("contextledger.stores.redis.store")

RedisClient = Redis | RedisCluster

UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    SlotNotCoveredError,
)


def mask_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***`` (see :func:`contextledger.stores.urls.mask`)."""
    return mask(url)


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its type name when it has none), any URL or secret pair in it masked."""
    return mask_text(" ".join(str(exc).split())) or type(exc).__name__


IDENTITY_OPTIONS = ("driver_info", "lib_name", "lib_version")
"""redis-py's options naming the library to the server (``CLIENT SETINFO``): one given, the store adds none."""


@cache
def identity() -> dict[str, Any]:
    """The options that name contextledger as redis-py's upstream driver, made once.

    The server's ``CLIENT LIST`` then shows ``lib-name=redis-py(contextledger_v<version>)``
    and redis-py's own version as ``lib-ver`` (Redis 7.2 and later record them; an older
    server refuses ``CLIENT SETINFO``, which redis-py ignores, as it does without these).
    redis-py's ``DriverInfo`` where it has one (a recent redis-py), else its ``lib_name``
    and ``lib_version``. Given none, recent redis-py looks its own version up in the installed
    package's metadata for every connection it makes; given these, no connection does.
    """
    from contextledger import __version__  # the package's own attribute: no module imported

    try:
        from redis import DriverInfo  # type: ignore[attr-defined,unused-ignore]  # a recent redis-py
    except ImportError:  # pragma: no cover - the suite runs a redis-py that has it
        return {"lib_name": f"redis-py(contextledger_v{__version__})", "lib_version": redis.__version__}
    return {"driver_info": DriverInfo(lib_version=redis.__version__).add_upstream_driver("contextledger", __version__)}


def connect(
    url: str, *, client_factory: Callable[[str, bool, dict[str, Any]], RedisClient] | None = None, **options: Any
) -> RedisClient:
    """A client for ``redis://``, ``rediss://`` or ``redis+cluster://host:port``, checked to answer.

    ``decode_responses`` is always off (the store decodes values itself so bytes stay
    exact); other options go to redis-py's ``from_url``, with contextledger named to the
    server (:func:`identity`) unless they name a library. ``client_factory(driver_url,
    cluster, options)``, when given, makes the client instead of redis-py's sync classes
    (a client of your own making, e.g. with TLS settings redis-py's URL cannot carry).

    Raises:
        InvalidLedgerURL: The scheme is not a Redis one, or the URL is malformed.
        ConfigurationError: An option the client does not know.
        StoreUnavailable: The server (or no cluster node) did not answer.
    """
    parsed = parse_redis(url)
    options["decode_responses"] = False
    options.setdefault("socket_connect_timeout", 5.0)
    try:
        client: RedisClient
        if client_factory is not None:
            client = client_factory(parsed.driver_url, parsed.cluster, options)
        else:
            if not any(name in options for name in IDENTITY_OPTIONS):  # the caller's name for itself wins
                options.update(identity())
            if parsed.cluster:
                client = RedisCluster.from_url(parsed.driver_url, **options)
            else:
                client = Redis.from_url(parsed.driver_url, **options)
        client.ping()
    except (RedisError, RedisClusterException) as exc:
        raise StoreUnavailable(f"cannot reach Redis at {parsed.endpoint}: {mask_text(one_line(exc), url)}") from exc
    except ValueError as exc:  # redis-py rejects malformed URLs this way
        raise InvalidLedgerURL(f"invalid Redis URL {parsed.masked!r}: {mask_text(str(exc), url)}") from None
    except TypeError as exc:  # an option the client does not know
        raise ConfigurationError(f"unsupported Redis store option: {exc}") from exc
    logger.info("url=<%s>, cluster=<%s> | connected redis ledger store", parsed.masked, parsed.cluster)
    return client


@contextmanager
def translated(endpoint: str, action: str) -> Iterator[None]:
    """Raise the library's errors for redis-py's inside the block (``action`` names what failed)."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise translation(exc, endpoint, action) from exc


DRIVER_ERRORS = (RedisError, RedisClusterException)
"""What :func:`translation` translates: every error of redis-py (none is one of the library's)."""


def translation(exc: BaseException, endpoint: str, action: str) -> Exception:
    """The library's error for redis-py's ``exc`` (raise it ``from exc``); ``action`` names what failed.

    A hot path catches :data:`DRIVER_ERRORS` itself instead of entering :func:`translated`.
    """
    if isinstance(exc, UNAVAILABLE):
        return StoreUnavailable(f"Redis at {endpoint} is unavailable ({action}): {one_line(exc)}")
    if isinstance(exc, RedisClusterException) and "cannot be connected" in str(exc):
        # no node answered while rediscovering the cluster
        return StoreUnavailable(f"Redis at {endpoint} is unavailable ({action}): {one_line(exc)}")
    return StoreError(f"Redis at {endpoint} failed ({action}): {one_line(exc)}")
