"""Corruption and isolation: what one ledger, session or key does never touches another.

* Two key prefixes on one Redis, with the same and with crafted session ids: writing,
  deleting and damaging one leaves every key of the other byte-for-byte unchanged.
* Passwords never appear in errors, logs or CLI output (a real Redis with a password).
* No pickle, marshal, eval or exec anywhere in ``src/``.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from typer.testing import CliRunner

from contextledger import Conversation, Ledger, Message, SlidingWindowConversationManager
from contextledger.cli import app
from contextledger.errors import ContextLedgerError, CorruptRecord
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys
from tests.reliability.conftest import Report
from tests.reliability.servers import DurableRedis, redis_binary

CRAFTED = ["s", "}{", "{s}", "s}", "{", "*", "s:state", "contextledger", "b:{s}", "\x00", "a b", "../s"]
SRC = Path(__file__).resolve().parents[2] / "src"


def _dump(client: Redis, prefix: str) -> dict[bytes, Any]:
    keys = sorted(client.scan_iter(match=prefix.encode() + b"*", count=1000))
    out: dict[bytes, Any] = {}
    for key in keys:
        kind = client.type(key)
        out[key] = (kind, client.dump(key))
    return out


def _fill(store: RedisStore) -> None:
    for session_id in CRAFTED:
        conv = Conversation(store, session_id, manager=SlidingWindowConversationManager(window_size=2))
        conv.append(Message.user(f"{session_id} q"), Message.assistant("a"), Message.user("q2"))
        conv.reduce("manual")


def test_two_prefixes_and_crafted_ids_never_touch_each_other(redis_url: str, report: Report) -> None:
    client = Redis.from_url(redis_url)
    first = RedisStore.from_url(redis_url, key_prefix="iso-a")
    second = RedisStore.from_url(redis_url, key_prefix="iso-a2")  # one is a prefix of the other
    try:
        for prefix in ("iso-a", "iso-a2"):
            for key in client.scan_iter(match=f"{prefix}*"):
                client.delete(key)
        _fill(second)
        before = _dump(client, "iso-a2")
        assert before
        _fill(first)
        for session_id in CRAFTED:
            Conversation(first, session_id).append(Message.user("more"))
        # Damage one of the first ledger's conversations, then delete every session there.
        keys = ConversationKeys.of("iso-a", "}{", "default")
        client.hset(keys.state, "version", b"garbage")
        with pytest.raises(CorruptRecord):
            first.load("}{", "default")
        assert first.load("{s}", "default") is not None
        for session_id in CRAFTED:
            first.delete_session(session_id)
        assert _dump(client, "iso-a2") == before, "the other ledger's keys changed"
        leftover = [k for k in client.scan_iter(match="iso-a*") if not k.startswith(b"iso-a2")]
        assert leftover == [] or all(b"slot" in k or b"sessions" in k for k in leftover), leftover
        assert sorted(s.session_id for s in second.sessions()) == sorted(CRAFTED)
        report(f"isolation/redis: {len(CRAFTED)} crafted ids on prefixes 'iso-a' and 'iso-a2': 0 foreign keys touched")
    finally:
        for prefix in ("iso-a", "iso-a2"):
            for key in client.scan_iter(match=f"{prefix}*"):
                client.delete(key)
        first.close()
        second.close()
        client.close()


def test_passwords_never_in_errors_logs_or_cli_output(caplog: pytest.LogCaptureFixture) -> None:
    if redis_binary() is None:
        pytest.skip("no redis-server")
    secret = "pw-" + "9f3e1c7a"
    server = DurableRedis(password=secret)
    server.start()
    caplog.set_level(logging.DEBUG, logger="contextledger")
    outputs: list[str] = []
    try:
        good = server.url
        wrong = good.replace(secret, secret + "x")
        down = f"redis://:{secret}@127.0.0.1:1/0"
        with Ledger.connect(good, key_prefix="pw") as ledger:
            ledger.conversation("s").append(Message.user("hi"))
            outputs.append(repr(ledger.store) + ledger.url)
        for url in (wrong, down, good.replace("/0", "/x"), good.replace("127.0.0.1:", "127.0.0.1:x")):
            with pytest.raises(ContextLedgerError) as info:
                Ledger.connect(url)
            error: BaseException | None = info.value
            while error is not None:
                outputs.append(str(error))
                error = error.__cause__ or error.__context__
        runner = CliRunner()
        commands = [["sessions", "--url", good], ["-vv", "sessions", "--url", wrong]]
        commands.append(["-vv", "show", "s", "--url", down])
        for args in commands:
            result = runner.invoke(app, args, catch_exceptions=False)
            outputs += [result.stdout, result.stderr]
        outputs.append(caplog.text)
    finally:
        server.close()
    leaked = [o for o in outputs if secret in o]
    assert not leaked, leaked[0][:500]


FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle"}
# The one allowed call: the record builders generate a function from a record class's own
# field names (checked to be identifiers), as `dataclasses` does -- never from stored data.
ALLOWED_CALLS = {("contextledger/model/trusted.py", "exec")}


def test_no_pickle_or_eval_in_src() -> None:
    offenders: list[str] = []
    allowed: list[str] = []
    files = sorted(SRC.rglob("*.py"))
    assert files
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                offenders += [f"{path}: import {n}" for n in names if n and n.split(".")[0] in FORBIDDEN_MODULES]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                if (path.relative_to(SRC).as_posix(), node.func.id) in ALLOWED_CALLS:
                    allowed.append(f"{path}:{node.lineno}")
                    continue
                offenders.append(f"{path}:{node.lineno}: {node.func.id}()")
            elif (
                isinstance(node, ast.Attribute)
                and node.attr in {"load", "loads"}
                and isinstance(node.value, ast.Name)
                and node.value.id in {"yaml", "pickle", "marshal"}
            ):
                offenders.append(f"{path}:{node.lineno}: {node.value.id}.{node.attr}")
    assert offenders == []
    assert len(allowed) <= 1, allowed  # a second exec, even in the allowed module, is a new one to justify
