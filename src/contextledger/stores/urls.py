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
    "MASK",
    "SECRET_NAMES",
    "Backend",
    "Durability",
    "RedisURL",
    "backend_of",
    "check_durability",
    "is_secret_name",
    "mask",
    "mask_text",
    "parse_redis",
    "parse_sql",
    "plain_sqlite_file",
    "plain_sqlite_masked",
    "scheme_of",
    "secrets_of",
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
# Patterns are strings, compiled (and cached by ``re``) on first use: a process that never
# masks a secret does not pay for compiling them at import.
_DB_PATH = r"/?|/\d+/?"

SECRET_NAMES = (
    "password",
    "passwd",
    "pass",
    "pwd",
    "passphrase",
    "token",
    "secret",
    "key",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "signature",
)
"""A query parameter (or DSN keyword) whose name ends with one of these carries a credential.

The name is compared in lower case with ``_``, ``-`` and ``.`` left out, so
``password``, ``sslpassword``, ``PASSWORD``, ``access_token``, ``api_key``, ``x-api-key``,
``sslkey``, ``client_secret``, ``private_key`` are credentials, and ``tokens_before`` or
``key_prefix`` are not. Masking a parameter that turns out to be harmless costs nothing;
showing a secret cannot be undone.
"""

MASK = "***"
"""What a credential is replaced with."""

_SECRET_NAME = "(?:" + "|".join(SECRET_NAMES) + ")$"
# A query parameter anywhere in a URL; its value runs to the next separator (an "@", "?"
# or "/" left unencoded stays inside it).
_SECRET_PARAM = r"[?&;](?P<name>[^=&;?#/\s]+)=(?P<value>[^&;#\s]*)"
# A URL in free text: a scheme, "://", then everything up to whitespace.
_URL_IN_TEXT = r"(?i)\b[a-z][a-z0-9+.-]*://\S*"
# A keyword=value pair (libpq DSN strings, driver options, echoed settings); the value may be quoted.
_PAIR = (
    r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<eq>\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s&;,'\"]*)"
)


def is_secret_name(name: str) -> bool:
    """Whether a query parameter or DSN keyword named ``name`` carries a credential (see :data:`SECRET_NAMES`)."""
    return re.search(_SECRET_NAME, re.sub(r"[_.\-\s]", "", unquote(name).lower())) is not None


def mask(url: str) -> str:
    """``url`` with every credential it carries replaced by ``***``.

    Masks the password of the userinfo (``scheme://user:password@host``), the value of
    every query parameter whose name says it carries a credential (``?password=``,
    ``?sslpassword=``, ``?token=``, ``?api_key=``...; see :data:`SECRET_NAMES`) or whose
    value holds such a ``name=value`` pair (``?options=-c password=...``), and in a
    libpq-style DSN string (``host=h user=u password=s``) the value of every such keyword.
    Works on anything a user may pass as a URL: a well-formed URL, a malformed one, a
    scheme-less ``user:password@host`` string and a DSN string. The username, host, path
    and the other parameters are kept (they tell which login failed); a URL without a
    credential comes back unchanged. An unencoded ``@``, ``?`` or ``/`` in a value makes
    the shape ambiguous: every reading a driver may make is masked, so more is masked,
    never less.
    """
    if not isinstance(url, str):
        return repr(type(url).__name__)
    out, last = [], 0
    for start, end in _merged(_secret_spans(url)):
        out += [url[last:start], MASK]
        last = end
    return "".join([*out, url[last:]])


def _secret_spans(url: str) -> list[tuple[int, int]]:
    """Where ``url`` holds a credential, under every reading of its shape (start, end offsets)."""
    spans: list[tuple[int, int]] = []
    scheme, sep, _ = url.partition("://")
    offset = len(scheme) + len(sep) if sep else 0
    rest = url[offset:]
    if not (sep and rest.startswith("/")):  # sqlite:////path/with@sign:x.db is a path, not a login
        # The login ends at the first "@" (SQLAlchemy), at the last "@" before the path (urllib),
        # or at the last "@" before the query (a password holding "/" or "?"): mask each reading.
        netloc_end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        ends = {rest.find("@"), rest.rfind("@", 0, netloc_end)}
        first = rest.find("@")
        if first >= 0:
            query = rest.find("?", first)
            ends.add(rest.rfind("@", 0, query if query >= 0 else len(rest)))
        for at in ends - {-1}:
            colon = rest.find(":", 0, at)
            if colon >= 0:
                spans.append((offset + colon + 1, offset + at))
    for match in re.finditer(_SECRET_PARAM, url):
        value = unquote(match["value"])
        if match["value"] and (is_secret_name(match["name"]) or _holds_secret_pair(value)):
            spans.append(match.span("value"))
    for match in re.finditer(_PAIR, url):
        if match["value"] and is_secret_name(match["name"]):
            spans.append(match.span("value"))
    return spans


def _holds_secret_pair(text: str) -> bool:
    return any(m["value"] and is_secret_name(m["name"]) for m in re.finditer(_PAIR, text))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def secrets_of(url: str | URL | None) -> tuple[str, ...]:
    """Every credential ``url`` carries, as written and percent-decoded (to find them echoed by a driver).

    What :func:`mask` masks; for a SQLAlchemy :class:`~sqlalchemy.engine.URL`, its
    password and secret-named query values. Longest first; empty values are left out.
    """
    if url is None:
        return ()
    found: list[str] = []
    if not isinstance(url, str):
        if url.password:
            found.append(str(url.password))
        for name, value in url.query.items():
            if is_secret_name(name):
                found += [value] if isinstance(value, str) else list(value)
        return _with_decoded(found)
    found = [url[start:end] for start, end in _merged(_secret_spans(url))]
    found += [value[1:-1] for value in found if len(value) > 1 and value[0] == value[-1] and value[0] in "'\""]
    for value in list(found):  # a DSN pair inside a decoded value: its value alone too
        found += [m["value"].strip("'\"") for m in re.finditer(_PAIR, unquote(value)) if is_secret_name(m["name"])]
    return _with_decoded(found)


def _mask_pairs(text: str) -> str:
    """``text`` with the value of every secret-named ``keyword=value`` pair masked."""
    return re.sub(
        _PAIR, lambda m: f"{m['name']}{m['eq']}{MASK}" if is_secret_name(m["name"]) and m["value"] else m[0], text
    )


def _with_decoded(values: list[str]) -> tuple[str, ...]:
    out: set[str] = set()
    for value in values:
        out.update(form for form in (value, unquote(value), unquote(value.replace("+", " "))) if form)
    # Longest first, so a secret that holds another is replaced whole.
    return tuple(sorted(out, key=lambda v: (-len(v), v)))


def mask_text(text: str, *urls: str | URL | None) -> str:
    """``text`` with every credential masked: those of ``urls`` wherever they stand, and those of any URL or DSN in it.

    Use it on anything that may echo a URL or a password: a driver's error message, a
    traceback, a log line. The credentials of ``urls`` are replaced wherever they appear
    (as written and percent-decoded: a driver may echo either); then every URL in the text
    is masked as :func:`mask` masks it, and every secret-named ``keyword=value`` pair.
    """
    for url in urls:
        for secret in secrets_of(url):
            text = text.replace(secret, MASK)
    text = re.sub(_URL_IN_TEXT, lambda m: mask(m[0]), text)
    return _mask_pairs(text)


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
        if parsed.username is not None or parsed.password is not None or parsed.host or parsed.port:
            # SQLAlchemy would refuse it later with an untyped ArgumentError.
            raise InvalidLedgerURL(
                f"invalid SQLite URL {mask(str(url) if isinstance(url, str) else parsed.render_as_string())!r}: "
                "a SQLite ledger is a file and takes no user, password, host or port "
                "(sqlite:///relative/path.db or sqlite:////absolute/path.db)"
            )
        return parsed.set(drivername="sqlite+pysqlite")
    if name in _POSTGRES_DRIVERS:
        return parsed.set(drivername="postgresql+psycopg")
    raise InvalidLedgerURL(
        f"unsupported SQL driver {parsed.drivername!r} in {mask(parsed.render_as_string(hide_password=True))}; "
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
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite" or not rest.startswith("/"):
        return None  # not SQLite, or a host or login stands before the path (parse_sql refuses it)
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
    if not re.fullmatch(_DB_PATH, parts.path):
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
