"""Ledger URLs: the one place that parses them and hides their passwords.

Every backend is named by a URL (``memory://``, ``sqlite:///file.db``,
``postgresql+psycopg://user:password@host/db``, ``redis://:password@host:6379/0``,
``redis+cluster://host:7000``). This module tells which backend a URL names, parses the
SQL ones with :func:`sqlalchemy.engine.make_url` and the Redis ones itself (redis-py
would report a malformed port or host as an untyped ``ValueError`` at connect time),
and masks the password of any URL -- parsed, malformed or scheme-less -- so that no
error message or log line ever carries one.

Every error here is :class:`~contextledger.errors.InvalidLedgerURL` with the URL masked.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit

from contextledger.errors import ConfigurationError, InvalidLedgerURL

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = [
    "BACKENDS",
    "DURABILITY",
    "Backend",
    "Durability",
    "RedisURL",
    "backend_of",
    "check_durability",
    "mask",
    "mask_text",
    "parse_redis",
    "parse_sql",
    "plain_sqlite_file",
    "plain_sqlite_masked",
    "scheme_of",
    "sqlite_path",
]

Backend = Literal["memory", "sql", "redis"]
Durability = Literal["primary", "replicated"]
DURABILITY: tuple[Durability, ...] = ("primary", "replicated")
"""Redis commit acknowledgements: by the primary alone (the default), or once a replica has it too."""

BACKENDS: dict[str, Backend] = {
    "memory": "memory",
    "sqlite": "sql",
    "postgresql": "sql",
    "postgres": "sql",
    "redis": "redis",
    "rediss": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
}
"""Every supported scheme (a SQL scheme may also name its driver: ``postgresql+psycopg``)."""

_EXAMPLES = "expected e.g. sqlite:///agents.db, postgresql+psycopg://..., redis://..., memory://"
_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}
_POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}
_REDIS_DRIVERS = {"redis": "redis", "rediss": "rediss", "redis+cluster": "redis", "rediss+cluster": "rediss"}
_DB_PATH = re.compile(r"/?|/\d+/?")
# In free text: scheme://user:password@ -- the password runs to the last "@" of its word.
_USERINFO = re.compile(
    r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<password>\S*?)(?P<tail>@)(?=[^\s@]*(?:\s|$))", re.IGNORECASE
)


def mask(url: str) -> str:
    """``url`` with the password of its userinfo replaced by ``***``.

    Works on anything a user may pass as a URL: a well-formed URL, a malformed one, and
    a scheme-less ``user:password@host`` string. The username is kept (it helps to tell
    which login failed); a URL without a password comes back unchanged.
    """
    if not isinstance(url, str):
        return repr(type(url).__name__)
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    # The authority ends at the first "/" after the userinfo; a password may hold "/" or
    # "@" when it was not percent-encoded, so the userinfo ends at the last "@" before a path.
    at = rest.rfind("@")
    if at < 0:
        return url
    userinfo = rest[:at]
    if ":" not in userinfo or (sep and userinfo.startswith("/")):
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{rest[at + 1 :]}"


def mask_text(text: str, *urls: str | None) -> str:
    """``text`` with the password of every URL in it (and of each of ``urls``) masked."""
    for url in urls:
        password = _password(url or "")
        if password:
            text = text.replace(password, "***")
    return _USERINFO.sub(r"\g<head>***\g<tail>", text)


def _password(url: str) -> str | None:
    _, sep, rest = url.partition("://")
    userinfo = (rest if sep else url).rpartition("@")[0]
    if ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1] or None


def scheme_of(url: str) -> str:
    """The scheme of ``url``, lower-cased.

    Raises:
        InvalidLedgerURL: ``url`` is not a string or has no ``scheme://``.
    """
    if not isinstance(url, str):
        raise InvalidLedgerURL(f"a ledger URL is a string, got {type(url).__name__} ({_EXAMPLES})")
    scheme, sep, _ = url.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        raise InvalidLedgerURL(f"not a ledger URL: {mask(url)!r} ({_EXAMPLES})")
    return scheme.lower()


def backend_of(url: str) -> Backend:
    """Which backend ``url`` names.

    Raises:
        InvalidLedgerURL: The URL has no scheme or names no supported backend.
    """
    scheme = scheme_of(url)
    backend = BACKENDS.get(scheme) or BACKENDS.get(scheme.split("+", 1)[0])
    if backend is None:
        raise InvalidLedgerURL(
            f"unsupported ledger URL scheme {scheme!r} in {mask(url)!r}; supported: {', '.join(sorted(BACKENDS))}"
        )
    return backend


def parse_sql(url: str | URL) -> URL:
    """Parse and normalise a SQL ledger URL with :func:`sqlalchemy.engine.make_url`.

    ``postgresql://`` and ``postgres://`` mean psycopg 3 (``postgresql+psycopg://``).

    Raises:
        InvalidLedgerURL: The URL is malformed or names an unsupported driver.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except (ArgumentError, ValueError) as exc:
        # The driver's message may echo the URL: keep only its masked form.
        detail = mask_text(str(exc), url if isinstance(url, str) else None)
        raise InvalidLedgerURL(f"not a SQL ledger URL: {mask(str(url))!r} ({detail})") from None
    name = parsed.drivername.lower()
    if name in _SQLITE_DRIVERS:
        return parsed.set(drivername="sqlite+pysqlite")
    if name in _POSTGRES_DRIVERS:
        return parsed.set(drivername="postgresql+psycopg")
    raise InvalidLedgerURL(
        f"unsupported SQL driver {parsed.drivername!r} in {parsed.render_as_string(hide_password=True)}; "
        "use sqlite:///path.db or postgresql+psycopg://user:password@host/db"
    )


def plain_sqlite_file(url: str) -> str | None:
    """The file a plain ``sqlite:///path`` URL names, as :func:`parse_sql` reads it, without SQLAlchemy.

    ``None`` for every other URL: another scheme, in-memory SQLite, the ``file:`` URI
    form, a host, query options. Those are parsed by :func:`parse_sql` only.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _SQLITE_DRIVERS or not rest.startswith("/") or "?" in rest:
        return None
    database = unquote(rest[1:])  # what make_url does to the path
    if database in {"", ":memory:"} or database.startswith("file:"):
        return None
    return database


def plain_sqlite_masked(database: str) -> str:
    """The masked URL :func:`parse_sql` gives a plain SQLite URL naming ``database`` (no password to hide)."""
    return "sqlite+pysqlite:///" + quote(database, safe=" +/")


def sqlite_path(url: str) -> Path | None:
    """The database file a ``sqlite`` URL names; ``None`` for other URLs and in-memory SQLite."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite":
        return None
    # sqlite:///relative.db and sqlite:////absolute.db; query options follow '?'.
    database = rest[1:] if rest.startswith("/") else rest
    database = database.split("?", 1)[0]
    if database in {"", ":memory:"} or database.startswith("file:"):
        return None
    return Path(database)


@dataclass(frozen=True)
class RedisURL:
    """A checked Redis ledger URL.

    Attributes:
        driver_url: The URL for redis-py (``redis://`` or ``rediss://``).
        cluster: Whether it names a Redis Cluster (``redis+cluster://``).
        endpoint: ``host:port`` for error messages.
        masked: The URL as given, password masked.
        durability: The ``?durability=`` the URL names (``None`` when it names none); it
            is the ledger's option, removed from :attr:`driver_url`.
    """

    driver_url: str
    cluster: bool
    endpoint: str
    masked: str
    durability: Durability | None = None


def check_durability(value: object) -> Durability:
    """``value`` as a durability setting.

    Raises:
        ConfigurationError: ``value`` is not one of :data:`DURABILITY`.
    """
    for known in DURABILITY:
        if value == known:
            return known
    raise ConfigurationError(f"durability must be one of {', '.join(map(repr, DURABILITY))}, got {value!r}")


def parse_redis(url: str) -> RedisURL:
    """Check a ``redis://``, ``rediss://`` or ``redis+cluster://`` URL before redis-py sees it.

    Raises:
        InvalidLedgerURL: The scheme is not a Redis one; the host, port or path is
            malformed; or the path is not a database number (redis-py would silently use
            database 0).
    """
    masked = mask(url)
    scheme = scheme_of(url)
    driver = _REDIS_DRIVERS.get(scheme)
    if driver is None:
        raise InvalidLedgerURL(f"not a Redis ledger URL: {masked!r} (expected redis://host:port/db)")
    driver_url = f"{driver}://{url.partition('://')[2]}"
    try:
        parts = urlsplit(driver_url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise InvalidLedgerURL(f"invalid Redis URL {masked!r}: {_url_problem(exc)}") from None
    if not _DB_PATH.fullmatch(parts.path):
        raise InvalidLedgerURL(
            f"invalid Redis URL {masked!r}: the path names the database number "
            "(redis://host:port/0); use key_prefix= to separate applications"
        )
    _check_host(parts, masked)
    endpoint = f"{_host_text(host or '127.0.0.1')}:{port or 6379}"
    driver_url, durability = _take_durability(driver_url, parts)
    return RedisURL(
        driver_url=driver_url,
        cluster=scheme.endswith("+cluster"),
        endpoint=endpoint,
        masked=masked,
        durability=durability,
    )


def _take_durability(driver_url: str, parts: SplitResult) -> tuple[str, Durability | None]:
    """Remove ``durability=`` from the query (redis-py does not know it) and check its value."""
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [value for name, value in query if name == "durability"]
    if not named:
        return driver_url, None
    if len(named) > 1:
        raise ConfigurationError("the URL names durability= more than once")
    kept = urlencode([(name, value) for name, value in query if name != "durability"])
    base = driver_url.split("?", 1)[0].split("#", 1)[0]
    return (f"{base}?{kept}" if kept else base), check_durability(named[0])


def _url_problem(exc: ValueError) -> str:
    text = str(exc)
    if "Port" in text or "port" in text:
        return "Port is not a number between 0 and 65535"
    if "IPv6" in text or "bracket" in text.lower():
        return "the IPv6 host is not closed with ']'"
    return "malformed URL"


def _check_host(parts: SplitResult, masked: str) -> None:
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.startswith("["):
        try:
            ipaddress.IPv6Address((parts.hostname or "").split("%", 1)[0])
        except ValueError:
            raise InvalidLedgerURL(f"invalid Redis URL {masked!r}: the host is not an IPv6 address") from None
    elif any(c in (parts.hostname or "") for c in "[] "):
        raise InvalidLedgerURL(f"invalid Redis URL {masked!r}: the host is malformed")


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host
