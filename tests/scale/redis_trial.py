"""One failover trial on a replicated Redis Cluster: writers, a SIGKILLed primary, the checker.

Used by the tests (one trial per durability) and by ``benchmarks/failover.py`` (several
trials, the loss figures of RELIABILITY.md).
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass

from contextledger import Ledger
from contextledger.stores.capabilities import complete
from contextledger.stores.redis.keys import ConversationKeys
from tests.plugins.redis_replicas import ReplicatedRedis, start_replicated_cluster
from tests.scale.failover import Writer, check_conversation

__all__ = ["Trial", "run_trial"]

PREFIX = "failover"


@dataclass
class Trial:
    """What one trial measured.

    Attributes:
        durability: The ledger's durability setting.
        lag: Seconds the replica was cut off before its primary was killed (0: it was not).
        acked: Appends acknowledged in all.
        acked_in_lag: Appends acknowledged from the moment the replica began to be cut
            off until the kill (those acknowledged in the first moments of cutting off may
            still have reached it).
        lost: Acknowledged appends missing after the failover.
        lost_before_cut: Of those, the ones acknowledged before the replica was cut off
            (or before the kill, without a lag): a replica that kept up has them, so this
            must be 0.
        failover_s: Seconds from the kill until a replica owned the slot.
        recovered_s: Seconds from the kill until every writer had an acknowledgement again.
        errors: Typed errors the writers met, by class name.
        untyped: Errors that were not the library's own.
    """

    durability: str
    lag: float
    acked: int
    acked_in_lag: int
    lost: int
    lost_before_cut: int
    failover_s: float
    recovered_s: float
    errors: dict[str, int]
    untyped: list[str]


def _sessions_on(deployment: ReplicatedRedis, count: int) -> tuple[int, list[str]]:
    """The primary owning the first session's slot and ``count`` sessions whose slots it owns."""
    names = (f"s{i}" for i in itertools.count())
    first = next(names)
    target = deployment.primary_of(ConversationKeys.of(PREFIX, first, "default").state)
    chosen = [first]
    for name in names:
        if len(chosen) == count:
            break
        if deployment.primary_of(ConversationKeys.of(PREFIX, name, "default").state) == target:
            chosen.append(name)
    return target, chosen


def run_trial(
    durability: str, *, lag: float = 0.0, writers: int = 4, before: int = 20, after: int = 20, budget: float = 90
) -> Trial:
    """Start a 3+3 cluster, write, SIGKILL the conversations' primary, write on, check; stop the cluster.

    Args:
        durability: ``"primary"`` or ``"replicated"``.
        lag: Cut the primary's replica off (paused, its link dropped) this long before the
            kill and resume it right after: a replica that fell behind, the case
            asynchronous replication loses.
        writers: Conversations written at once (all on the killed primary).
        before: Appends each writer has acknowledged before the kill.
        after: Appends each writer must have acknowledged after the promotion.
        budget: Seconds the writing may take in all (the writers stop by themselves).
    """
    deployment = start_replicated_cluster()
    ledger: Ledger | None = None
    try:
        target, sessions = _sessions_on(deployment, writers)
        (replica,) = deployment.replicas_of(target)
        ledger = Ledger.connect(deployment.url, key_prefix=PREFIX, durability=durability, replica_timeout=0.5)
        deadline = time.monotonic() + budget
        crew = [Writer(ledger, session, deadline) for session in sessions]
        for writer in crew:
            writer.start()
        _wait(lambda: all(len(w.acked) >= before for w in crew), deadline, "writes before the kill")
        cut_at = time.monotonic()
        if lag:
            deployment.cut_off(target, replica)
            time.sleep(lag)
        killed_at = time.monotonic()
        deployment.kill(target)
        if lag:
            deployment.resume(replica)
        promoted = deployment.wait_promoted(target, ConversationKeys.of(PREFIX, sessions[0], "default").state)
        failover_s = time.monotonic() - killed_at
        assert promoted == replica
        # as an operator would: the old primary comes back, as the new one's replica
        # (until then a replicated commit has no replica to wait for)
        deployment.restart(target)
        _wait(lambda: all(w.acked_since(killed_at) >= 1 for w in crew), deadline, "the first write after the kill")
        recovered_s = time.monotonic() - killed_at
        settled = time.monotonic()
        _wait(lambda: all(w.acked_since(settled) >= after for w in crew), deadline, "writes after the failover")
        for writer in crew:
            writer.join()
        missing = {
            i: w.acked[i]
            for w in crew
            for i in check_conversation(complete(ledger.store, "tests"), w.session_id, set(w.acked))
        }
        errors: Counter[str] = Counter()
        for writer in crew:
            errors.update(writer.errors)
        return Trial(
            durability=durability,
            lag=lag,
            acked=sum(len(w.acked) for w in crew),
            acked_in_lag=sum(1 for w in crew for at in w.acked.values() if cut_at < at <= killed_at) if lag else 0,
            lost=len(missing),
            lost_before_cut=sum(1 for at in missing.values() if at <= cut_at),
            failover_s=round(failover_s, 2),
            recovered_s=round(recovered_s, 2),
            errors=dict(errors),
            untyped=[u for w in crew for u in w.untyped],
        )
    finally:
        if ledger is not None:
            ledger.close()
        deployment.stop()
        # every node it ran, the one restarted after its kill too, is gone: nothing outlives the trial
        alive = [p.port for p in deployment.processes.values() if p.popen.poll() is None]
        assert not alive, f"redis-server on {alive} outlived the trial"


def _wait(condition: object, deadline: float, what: str) -> None:
    assert callable(condition)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
