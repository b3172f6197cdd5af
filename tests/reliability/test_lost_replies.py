"""Lost replies: a loopback proxy drops the answer to applied commits, on PostgreSQL and Redis.

One ``Ledger`` and one ``Conversation`` (a sliding window, so reductions happen too)
take a random mix of appends, model calls and reductions while a loopback TCP proxy in
front of the real server (``tests/plugins/proxy.py``) loses commits: the server applied
the commit and the answer is cut (most), the request is cut before the server saw it,
or the answer is cut and the server stays unreachable for a moment (the outcome cannot
be read back). Every failure must be a typed error; the same objects carry on once the
proxy lets traffic through again; an append retried with the same message id ends up
exactly once, and the model-call count equals the calls that were made, never one more.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial

import pytest

from contextledger import Ledger, Message, SlidingWindowConversationManager
from contextledger.errors import ContextLedgerError, DuplicateEntry
from tests.plugins.faults import LossyStore, lossy_postgres, lossy_redis
from tests.plugins.proxy import TcpProxy
from tests.plugins.redis import purge
from tests.reliability.conftest import SOAK, Report

STEPS = 240 if SOAK else 60
LOSE_EVERY = 2  # about one step in two loses a commit
SESSION = "lost"


@pytest.fixture(params=["postgres", "redis"])
def lossy(request: pytest.FixtureRequest) -> Iterator[LossyStore]:
    proxies: list[TcpProxy] = []
    target: tuple[str, str] | None = None
    if request.param == "postgres":
        store, proxy = lossy_postgres(request.getfixturevalue("postgres_ledger_url"))
        proxies.append(proxy)
    else:
        target = (request.getfixturevalue("redis_url"), request.getfixturevalue("redis_key_prefix"))
        store, proxies = lossy_redis(*target)
    try:
        yield store
    finally:
        store.restore()
        store.disarm()
        store.store.close()
        for proxy in proxies:
            proxy.close()
        if target is not None:
            purge(*target)


def _until_done(action: Callable[[], object], lossy: LossyStore, errors: Counter[str]) -> None:
    """Run ``action`` until it succeeds, counting the typed errors on the way (untyped ones fail the test)."""
    for _ in range(20):
        try:
            action()
            return
        except DuplicateEntry:
            return  # an earlier attempt had been applied
        except ContextLedgerError as exc:
            errors[type(exc).__name__] += 1
            lossy.disarm()
            lossy.restore()
            time.sleep(0.05)
        except Exception as exc:  # pragma: no cover - what this test exists to catch
            pytest.fail(f"untyped error after a lost reply: {type(exc).__module__}.{type(exc).__name__}: {exc}")
    pytest.fail("the same Ledger did not recover after a lost reply")


def test_lost_replies_are_typed_and_applied_exactly_once(lossy: LossyStore, report: Report) -> None:
    rng = random.Random(20261123)
    errors: Counter[str] = Counter()
    appended: list[str] = []
    calls = 0
    with Ledger(lossy.store) as ledger:
        conv = ledger.conversation(SESSION, manager=SlidingWindowConversationManager(window_size=8))
        for step in range(STEPS):
            if rng.randrange(LOSE_EVERY) == 0:
                how = rng.choice(["applied", "not sent", "applied, then down"])
                lossy.arm(apply=how != "not sent", then_down=how == "applied, then down")
            op = rng.choice(["append", "append", "call", "reduce"])
            if op == "append":
                message = Message.user(f"step {step}", message_id=f"m{step:04d}")
                _until_done(partial(conv.append, message), lossy, errors)
                appended.append(message.message_id)
            elif op == "call":
                calls += 1
                try:
                    conv.before_model_call()
                except ContextLedgerError as exc:  # the count stays pending and rides with the next commit
                    errors[type(exc).__name__] += 1
                    lossy.disarm()
                    lossy.restore()
                answer = Message.assistant(f"answer {step}", message_id=f"a{step:04d}")
                _until_done(partial(conv.append, answer), lossy, errors)
                appended.append(answer.message_id)
            else:
                _until_done(lambda: conv.reduce("manual"), lossy, errors)
            lossy.disarm()
            lossy.restore()
        history = ledger.history(SESSION)
        stored = ledger.conversation(SESSION)
        reductions = {r.reduction_id for r in ledger.reductions(SESSION)}
    ids = [h.message.message_id for h in history]
    assert ids == appended, "an acknowledged append is missing, doubled or out of order"
    assert stored.model_call_count == calls, f"{stored.model_call_count} model calls stored, {calls} made"
    assert list(stored.view.entries) == list(conv.view.entries)
    assert all(h.evicted_by in reductions for h in history if h.status == "evicted")
    assert set(errors) <= {"StoreUnavailable", "CommitOutcomeUnknown", "ConcurrencyConflict"}, errors
    report(
        f"lost-replies/{lossy.backend}: {STEPS} steps, {lossy.dropped} commits lost (proxy), typed errors only "
        f"{dict(errors)}; {len(ids)} appends and {calls} model calls exactly once, {len(reductions)} reductions"
    )
