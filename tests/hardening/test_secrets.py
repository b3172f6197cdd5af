"""No credential is ever shown, whatever part of a URL carries it (DESIGN.md, semantic 13).

A property over URL shapes and credential positions, on every backend: the password of
the userinfo, any secret-named query parameter (``password``, ``sslpassword``,
``token``, ``api_key``...), both at once, percent-encoded or not, and a DSN-style string;
on a live server, an unreachable one, and a malformed URL. Whatever happens -- the
ledger opens, or a typed error is raised -- the secret appears in none of: ``repr`` and
``str`` of the ledger and its store, ``ledger.url``, every log line (every logger, debug
level), warnings, an export, the error and its whole chain (the traceback a user would
see), and the output of ``sessions``, ``show``, ``history``, ``export`` and ``db current``
(stdout and stderr, ``-vv`` included).
"""

from __future__ import annotations

import logging
import string
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from contextledger import Ledger, Message
from contextledger.cli import ExitCode, app
from contextledger.errors import ContextLedgerError
from contextledger.history.transfer import dump_lines
from contextledger.stores.urls import mask, mask_text, secrets_of
from tests.soak import examples

Position = Literal["userinfo", "query", "both", "dsn"]
Variant = Literal["live", "unreachable", "malformed"]
SECRET_PARAMS = [
    "password",
    "PASSWORD",
    "passwd",
    "pwd",
    "sslpassword",
    "token",
    "access_token",
    "api_key",
    "apikey",
    "secret",
    "client_secret",
]
# Printable ASCII that may stand in a password; the URL gets it percent-encoded (or raw
# when only unreserved characters are drawn).
SECRET_CHARS = string.ascii_letters + string.digits + "@:/?#%&=+ '\"!$^*()[]{}~-_.,;<>|\\"
RAW_SAFE = string.ascii_letters + string.digits + "-._~"

# A recognisable head and tail: nothing in an output holds them by accident.
secrets = st.builds(lambda body: f"Zq{body}9Zq", st.text(SECRET_CHARS, min_size=6, max_size=24))
raw_secrets = st.builds(lambda body: f"Zq{body}9Zq", st.text(RAW_SAFE, min_size=6, max_size=24))


@dataclass(frozen=True)
class Shape:
    """Where the secret stands and what the URL points at."""

    position: Position
    param: str
    raw: bool
    variant: Variant


shapes = st.builds(
    Shape,
    position=st.sampled_from(["userinfo", "query", "both", "dsn"]),
    param=st.sampled_from(SECRET_PARAMS),
    raw=st.booleans(),
    variant=st.sampled_from(["live", "live", "unreachable", "malformed"]),
)


def forms(secret: str) -> set[str]:
    """The secret as written and as a URL would carry it: none of these may be shown."""
    return {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}


def build_url(base: str, secret: str, shape: Shape) -> str:
    """``base`` with ``secret`` placed as ``shape`` says."""
    encoded = secret if shape.raw else quote(secret, safe="")
    scheme, _, rest = base.partition("://")
    if shape.position == "dsn":
        return f"host=127.0.0.1 port=5432 user=u {shape.param}={encoded} dbname=ledger"
    if shape.variant == "unreachable":
        rest = _with_endpoint(scheme, rest, "127.0.0.1:1")
    elif shape.variant == "malformed":
        rest = _with_endpoint(scheme, rest, "127.0.0.1:notaport")
    if shape.position in ("userinfo", "both"):
        login, at, after = rest.partition("@")
        user = login if at else ("u" if scheme.startswith("sqlite") else "")
        rest = f"{user}:{encoded}@{after if at else rest}"
    if shape.position in ("query", "both"):
        rest += ("&" if "?" in rest else "?") + f"{shape.param}={encoded}"
    return f"{scheme}://{rest}"


def _with_endpoint(scheme: str, rest: str, endpoint: str) -> str:
    if scheme.startswith("sqlite"):  # a directory that does not exist, or no file at all
        return "/no/such/directory/ledger.db" if ":1" in endpoint else ""
    if scheme == "memory":
        return rest
    login, at, after = rest.rpartition("@")
    _hostport, slash, path = after.partition("/")
    return f"{login}{at}{endpoint}{slash}{path}"


def error_texts(exc: BaseException) -> list[str]:
    """Everything a user may see of an error: each exception of the chain and the formatted traceback."""
    texts = ["".join(traceback.format_exception(exc))]
    seen: set[int] = set()
    chain: BaseException | None = exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        texts += [str(chain), repr(chain)]
        chain = chain.__cause__ or chain.__context__
    return texts


def library_outputs(url: str) -> list[str]:
    """What the library shows of ``url``: repr, ``.url``, an export; or the typed error."""
    outputs: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            options = {"connect_timeout": 2} if url.startswith("postgresql") else {}
            with Ledger.connect(url, **options) as ledger:
                outputs += [repr(ledger), str(ledger), ledger.url, repr(ledger.store), str(ledger.store)]
                ledger.conversation("secret-shown").append(Message.user("hello"))
                outputs.append(dump_lines(ledger.export_records("secret-shown")))
                outputs.append(repr(ledger.sessions()))
        except ContextLedgerError as exc:  # anything else is a bug: the test fails
            outputs += error_texts(exc)
    outputs += [str(w.message) for w in caught]
    return outputs


COMMANDS = [
    ["sessions"],
    ["show", "secret-shown"],
    ["history", "secret-shown"],
    ["export", "secret-shown"],
    ["db", "current"],
]


def cli_outputs(url: str) -> list[str]:
    """stdout and stderr of each inspector command on ``url``, with ``-vv`` (debug logs and tracebacks)."""
    outputs: list[str] = []
    for command in COMMANDS:
        result = CliRunner().invoke(app, ["-vv", *command, "--url", url], catch_exceptions=False)
        assert result.exit_code in {c.value for c in ExitCode}, (command, result.output)
        outputs += [result.stdout, result.stderr]
    return outputs


@pytest.fixture
def base_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A live ledger of the backend ``request.param`` names."""
    backend: str = request.param
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    if backend == "memory":
        return "memory://"
    fixture = {"postgres": "postgres_ledger_url", "redis": "redis_url", "redis_cluster": "redis_cluster_url"}[backend]
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture
def every_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every log record of every logger, debug level."""
    caplog.set_level(logging.DEBUG)
    return caplog


BACKENDS = ["memory", "sqlite", "postgres", "redis", "redis_cluster"]


@pytest.mark.parametrize("base_url", BACKENDS, indirect=True)
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret=st.one_of(secrets, raw_secrets), shape=shapes)
def test_no_credential_is_shown(
    base_url: str, every_log: pytest.LogCaptureFixture, secret: str, shape: Shape, tmp_path: Path
) -> None:
    every_log.clear()
    url = build_url(base_url, secret, shape)
    outputs = library_outputs(url)
    outputs += [record.getMessage() for record in every_log.records]
    outputs += [every_log.text]
    hidden = forms(secret)
    for text in outputs:
        for form in hidden:
            assert form not in text, (url, form, text)


@pytest.mark.parametrize("base_url", ["sqlite", "postgres", "redis"], indirect=True)
@settings(
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret=st.one_of(secrets, raw_secrets), shape=shapes)
def test_no_credential_is_shown_by_the_cli(base_url: str, secret: str, shape: Shape) -> None:
    url = build_url(base_url, secret, shape)
    library_outputs(url)  # a session to show, when the URL opens
    hidden = forms(secret)
    for text in cli_outputs(url):
        for form in hidden:
            assert form not in text, (url, form, text)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://h/0?password=S3cr3t-x", "redis://h/0?password=***"),
        ("postgresql+psycopg://u@h/db?password=S3cr3t-x", "postgresql+psycopg://u@h/db?password=***"),
        (
            "postgresql+psycopg://u@h/db?sslmode=require&sslpassword=S3cr3t-x",
            "postgresql+psycopg://u@h/db?sslmode=require&sslpassword=***",
        ),
        ("sqlite://u:S3cr3t-x@/path", "sqlite://u:***@/path"),
        ("redis://h?Token=S3cr3t-x;db=0", "redis://h?Token=***;db=0"),
        ("pg://h/db?options=-c%20password%3DS3cr3t-x", "pg://h/db?options=***"),
        ("host=h user=u password=S3cr3t-x dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h password='S3cr3t x' dbname=d", "host=h password=*** dbname=d"),
        ("postgresql://u:pa?ss@h/db?x=1", "postgresql://u:***@h/db?x=1"),
        ("redis://h:6379/0?db=0", "redis://h:6379/0?db=0"),
    ],
)
def test_mask_every_position(url: str, masked: str) -> None:
    assert mask(url) == masked
    for secret in secrets_of(url):
        assert secret not in mask(url)
        assert secret not in mask_text(f"driver said: {secret!r} failed", url)
    assert mask_text(f"at {url} and again {url}") == f"at {masked} and again {masked}"
