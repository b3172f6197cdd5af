"""Server faults: PostgreSQL and Redis stopped (cleanly, then by SIGKILL) and restarted mid-run.

One ``Ledger`` and one ``Conversation`` live through every outage: while the server is
down every call fails with one of the library's typed errors (never a driver error);
after the restart the same objects work again, and every acknowledged append is in the
ledger exactly once. An append whose outcome an outage left unknown is retried with the
same message id: it is then either applied once or reported as already there.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import pytest

from contextledger import Conversation, Ledger, Message
from contextledger.errors import ContextLedgerError, DuplicateEntry
from tests.reliability.conftest import SOAK, Report, fresh_database
from tests.reliability.servers import DurablePostgres, DurableRedis

ROUNDS = 6 if SOAK else 2  # alternately a clean stop and a SIGKILL
DOWN_ATTEMPTS = 3
RECOVERY_TIMEOUT = 60.0


def _append_typed(conv: Conversation, message: Message, errors: Counter[str]) -> bool:
    try:
        conv.append(message)
        return True
    except DuplicateEntry:
        return True  # an earlier attempt was applied after all
    except ContextLedgerError as exc:
        errors[type(exc).__name__] += 1
        return False
    except Exception as exc:  # pragma: no cover - what this test exists to catch
        pytest.fail(f"untyped error during an outage: {type(exc).__module__}.{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_the_same_ledger_recovers_after_a_restart(backend: str, request: pytest.FixtureRequest, report: Report) -> None:
    options: dict[str, Any] = {}
    server: DurablePostgres | DurableRedis
    if backend == "postgres":
        postgres: DurablePostgres = request.getfixturevalue("durable_postgres")
        server, url = postgres, fresh_database(postgres)
        options = {"connect_timeout": 2}
    else:
        server = request.getfixturevalue("durable_redis")
        url = server.url
        options = {"key_prefix": f"faults-{uuid.uuid4().hex[:8]}", "socket_timeout": 2.0}
    errors: Counter[str] = Counter()
    acked: list[str] = []
    recoveries: list[float] = []
    with Ledger.connect(url, **options) as ledger:
        conv = ledger.conversation("faults")
        for round_ in range(ROUNDS):
            for i in range(10):
                message = Message.user(f"round {round_} before {i}", message_id=f"r{round_}-b{i}")
                assert _append_typed(conv, message, errors)
                acked.append(message.message_id)
            if round_ % 2 == 0:
                server.stop()
            else:
                server.crash()
            unknown = []
            for i in range(DOWN_ATTEMPTS):
                message = Message.user(f"round {round_} down {i}", message_id=f"r{round_}-d{i}")
                assert not _append_typed(conv, message, errors), "an append succeeded with the server down"
                unknown.append(message)
                with pytest.raises(ContextLedgerError):
                    ledger.history("faults")
            server.start()
            started = time.monotonic()
            for message in unknown:  # retried with the same ids: applied once at most
                while not _append_typed(conv, message, errors):
                    assert time.monotonic() - started < RECOVERY_TIMEOUT, "the ledger did not recover"
                    time.sleep(0.2)
                acked.append(message.message_id)
            recoveries.append(time.monotonic() - started)
        ids = [h.message.message_id for h in ledger.history("faults")]
    assert ids == acked, "an acknowledged append is missing, doubled or out of order"
    assert set(errors) <= {
        "StoreUnavailable",
        "CommitOutcomeUnknown",
        "StoreError",
        "StoreTimeout",
        "ConcurrencyConflict",
    }, errors
    report(
        f"faults/{backend}: {ROUNDS} outages (clean stop and SIGKILL), typed errors only {dict(errors)}, "
        f"the same Ledger recovered in {max(recoveries):.1f} s at most, {len(acked)} appends exactly once"
    )
