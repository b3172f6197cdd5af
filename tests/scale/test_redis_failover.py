"""Redis Cluster with replicas: a primary SIGKILLed under writers, with each durability setting.

With ``durability="replicated"`` every acknowledged changeset survives on the promoted
replica, even one that had fallen behind when its primary died; with the default the
appends acknowledged while the replica lagged are lost (the figure RELIABILITY.md states).
In both, the same ledger carries on through the failover with typed errors only, and no
changeset is partial or applied twice.
"""

from __future__ import annotations

from contextledger.errors import StoreUnavailable
from tests.plugins import unavailable
from tests.scale.redis_trial import Trial, run_trial

WRITERS = 4


def _trial(durability: str, lag: float) -> Trial:
    try:
        return run_trial(durability, lag=lag, writers=WRITERS)
    except StoreUnavailable as exc:
        unavailable(f"a replicated Redis Cluster could not be started: {exc}")


def test_replicated_commits_survive_a_failover_behind_a_lagging_replica() -> None:
    trial = _trial("replicated", lag=0.4)
    assert trial.untyped == []
    assert trial.lost == 0, trial
    assert trial.lost_before_cut == 0
    # the writers did meet the failover, as typed errors, and carried on
    assert trial.errors, trial
    assert trial.acked >= WRITERS * 40


def test_default_durability_loses_what_the_lagging_replica_missed() -> None:
    trial = _trial("primary", lag=0.4)
    assert trial.untyped == []
    # acknowledged by the primary alone while the replica was paused: gone with the primary
    assert trial.acked_in_lag > 0, trial
    assert trial.lost > 0, trial
    # ... and only those: what the primary acknowledged before its replica was cut off survived
    assert trial.lost_before_cut == 0, trial
    assert trial.lost <= trial.acked_in_lag, trial
