"""Erasure that reaches every copy, retention, and key rotation -- tried as an unlucky user would.

* Random fork trees (forks of forks at random calls, sessions deleted between them) with
  random erasures: afterwards no session descending from where a message was erased
  holds it, whatever the ledger's own lineage says (the test keeps its own tree).
* Forks and erasures racing in two threads on one session.
* A Redis ttl shorter than an agent's pauses: each write either commits or raises
  ``SessionExpired``, never another error, never half a conversation.
* A key rotation killed (SIGKILL) at random moments: everything still opens with both
  keys, equal to what was written, and the next run finishes.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from contextledger import Ledger, Message
from contextledger.encryption import Keyring, new_key
from contextledger.errors import SessionExpired
from contextledger.history.rotation import key_census, rotate
from contextledger.history.transfer import dump_lines
from contextledger.stores.capabilities import CompleteStore, complete
from tests.plugins.redis import purge
from tests.reliability.conftest import SOAK, Report


def _texts(ledger: Ledger, session: str) -> str:
    parts = [h.message.model_dump_json() for h in ledger.history(session)]
    parts += [e.message.model_dump_json() for e in ledger.conversation(session).view]
    parts.append(dump_lines(ledger.export_records(session)))
    return "\n".join(parts)


def test_random_fork_trees_keep_no_erased_secret(store: CompleteStore, report: Report) -> None:
    rng = random.Random(22)
    trials = 40 if SOAK else 6
    ledger = Ledger(store)
    forks = erased = checked = 0
    for trial in range(trials):
        root = f"t{trial}"
        chat = ledger.conversation(root)
        secrets: dict[str, str] = {}
        for i in range(6):
            secret = f"secret-{trial}-{i}-{rng.randrange(10**9)}"
            (msg,) = chat.append(Message.user(f"note {secret}") if i % 2 == 0 else Message.assistant(secret))
            secrets[msg.message_id] = secret
            chat.before_model_call()
        parent: dict[str, str | None] = {root: None}
        for n in range(rng.randrange(3, 8)):
            source = rng.choice(sorted(parent))
            if not ledger.agents(source):
                continue
            calls = ledger.conversation(source).model_call_count
            at = rng.choice([None, *range(1, calls + 1)]) if calls else None
            child = f"{root}-f{n}"
            ledger.fork(source, child, at_call=at)
            ledger.conversation(child).append(Message.user(f"own words of {child}"))
            parent[child] = source
            forks += 1
        if rng.random() < 0.5:  # a session between others goes away
            middle = rng.choice([s for s in parent if s != root])
            ledger.delete_session(middle)

        def below(session: str, parent: dict[str, str | None] = parent) -> set[str]:
            out = {session}
            for child, up in parent.items():
                if up is not None and up in out:
                    out |= below(child)
            return out

        for entry_id in rng.sample(sorted(secrets), 3):
            holders = [
                s
                for s in parent
                if ledger.agents(s) and complete(ledger.store, "tests").entries(s, "default", [entry_id])
            ]
            origin = rng.choice(holders)
            ledger.erase(origin, entry_id, reason=f"trial {trial}")
            erased += 1
            for session in below(origin):
                if ledger.agents(session):
                    assert secrets[entry_id] not in _texts(ledger, session), (trial, origin, session)
                    checked += 1
    report(
        f"erasure, {store.url.split(':')[0]}: {trials} random fork trees, {forks} forks, {erased} erasures, "
        f"{checked} descendant sessions checked: 0 kept an erased secret"
    )


def test_forks_racing_erasures_keep_no_erased_secret(store: CompleteStore, report: Report) -> None:
    rounds = 30 if SOAK else 6
    ledger = Ledger(store)
    kept = 0
    for r in range(rounds):
        root = f"race{r}"
        chat = ledger.conversation(root)
        messages = chat.append(*(Message.user(f"race secret {r}-{i}") for i in range(6)))
        made: list[str] = [root]
        errors: list[BaseException] = []

        def forker(made: list[str] = made, root: str = root, errors: list[BaseException] = errors) -> None:
            try:
                for n in range(5):
                    child = f"{root}-c{n}"
                    ledger.fork(random.choice(made), child)
                    made.append(child)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=forker)
        thread.start()
        for m in messages[::2]:
            ledger.erase(root, m.message_id, reason="race")
            time.sleep(0.001)
        thread.join(60)
        assert not errors, errors
        for session in made:
            text = _texts(ledger, session)
            for i in range(0, 6, 2):
                kept += f"race secret {r}-{i}" in text
    assert kept == 0
    report(f"erasure racing forks, {store.url.split(':')[0]}: {rounds} rounds x 5 forks x 3 erasures: 0 kept")


@pytest.fixture(params=["redis", "redis_cluster"])
def redis_any(request: pytest.FixtureRequest, redis_key_prefix: str) -> Iterator[str]:
    value: str = request.getfixturevalue(f"{request.param}_url")
    yield value
    purge(value, redis_key_prefix)


def test_agents_pausing_around_the_ttl_commit_or_are_told_it_expired(
    redis_any: str, redis_key_prefix: str, report: Report
) -> None:
    rng = random.Random(7)
    trials = 60 if SOAK else 16
    ttl = 0.25
    committed = expired = 0
    with Ledger.connect(redis_any, key_prefix=redis_key_prefix, ttl=timedelta(seconds=ttl)) as ledger:
        for n in range(trials):
            chat = ledger.conversation(f"pause{n}")
            chat.append(Message.user("hello"), Message.assistant("hi"))
            time.sleep(rng.uniform(0, 2 * ttl))
            try:
                chat.append(Message.user("are you there?"))
                committed += 1
                assert [m.plain_text for m in ledger.conversation(f"pause{n}").messages][-1] == "are you there?"
            except SessionExpired:
                expired += 1
                fresh = ledger.conversation(f"pause{n}")
                assert fresh.version == 0  # gone whole: nothing half-expired
                fresh.append(Message.user("starting again"))
    assert committed + expired == trials
    report(
        f"ttl pauses, {redis_any.split(':')[0]}: {trials} agents pausing 0-{2 * ttl:g}s around a {ttl:g}s ttl: "
        f"{committed} committed, {expired} SessionExpired, 0 other errors"
    )


ROTATOR = r"""
import sys
from contextledger import Ledger
from contextledger.encryption import Keyring
from contextledger.history.rotation import rotate
url, keys = sys.argv[1], sys.argv[2]
with Ledger.connect(url, encryption=Keyring.parse(keys)) as ledger:
    print("rotating", flush=True)
    rotate(ledger.store, batch_size=1, on_batch=lambda n: print("batch", flush=True))
print("done", flush=True)
"""


def test_a_rotation_killed_at_random_moments_resumes(tmp_path: Path, report: Report) -> None:
    rng = random.Random(8)
    kills = 20 if SOAK else 4
    old, new = new_key(), new_key()
    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    expected: dict[str, list[str]] = {}
    states: dict[str, dict[str, int]] = {}

    def write_under_the_old_key(first: int) -> None:
        """Six more conversations sealed with the old key: work for the next rotation."""
        with Ledger.connect(url, encryption=Keyring([("old", old)])) as ledger:
            for s in range(first, first + 6):
                chat = ledger.conversation(f"s{s}")
                chat.append(*(Message.user(f"message {s}-{i}") for i in range(20)))
                chat.set_agent_state({"n": s})
                expected[f"s{s}"] = [h.message.plain_text for h in ledger.history(f"s{s}")]
                states[f"s{s}"] = {"n": s}

    write_under_the_old_key(0)
    both = f"new:{new},old:{old}"
    killed_midway = 0
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, "-c", ROTATOR, url, both], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "rotating"
        for _ in range(rng.randrange(0, 120)):  # killed after a random number of batches
            if not proc.stdout.readline():
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        with Ledger.connect(url, encryption=Keyring.parse(both)) as ledger:
            census: dict[str, int] = {}
            for session, texts in expected.items():
                assert [h.message.plain_text for h in ledger.history(session)] == texts
                assert ledger.conversation(session).agent_state == states[session]
                for key_id, count in key_census(ledger.store, session).items():
                    census[key_id] = census.get(key_id, 0) + count
        killed_midway += bool(census.get("old")) and bool(census.get("new"))
        if not census.get("old"):  # the rotation had finished: give the next one work
            write_under_the_old_key(len(expected))
    with Ledger.connect(url, encryption=Keyring.parse(both)) as ledger:
        rotate(ledger.store)
    with Ledger.connect(url, encryption=Keyring([("new", new)])) as ledger:
        for session, texts in expected.items():
            assert set(key_census(ledger.store, session)) == {"new"}
            assert [h.message.plain_text for h in ledger.history(session)] == texts
    report(
        f"rotation, SQLite: {kills} SIGKILLs during a rotation in batches of 1 ({killed_midway} with both keys "
        "in use): every value opened and equal after each, the next run finished, the old key no longer needed"
    )
