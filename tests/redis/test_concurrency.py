"""Two processes append to one conversation at once: nothing is lost, each keeps its order."""

from __future__ import annotations

import multiprocessing

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.ledger import Ledger
from contextledger.model.messages import Message
from contextledger.stores.redis import RedisStore

PER_PROCESS = 25


def _writer(url: str, prefix: str, name: str, start: multiprocessing.synchronize.Event) -> None:
    with Ledger.connect(url, key_prefix=prefix) as ledger:
        conv = ledger.conversation("race", "a", max_retries=500)
        start.wait(timeout=30)
        for i in range(PER_PROCESS):
            conv.append(Message.user(f"{name}-{i}"))
            conv.before_model_call()


@pytest.mark.parametrize("backend_name", ["redis", "redis_cluster"])
def test_two_processes_append_concurrently(request: pytest.FixtureRequest, backend_name: str) -> None:
    store: RedisStore = request.getfixturevalue(f"{backend_name}_store")
    url: str = request.getfixturevalue(f"{backend_name}_url")
    Conversation(store, "race", "a").append(Message.user("seed"))
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, store.key_prefix, f"p{n}", start)) for n in range(2)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=120)
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    assert [p.exitcode for p in procs] == [0, 0]

    snap = store.load("race", "a")
    assert snap is not None
    texts = [e.message.plain_text for e in snap.entries]
    assert sorted(texts) == sorted(["seed"] + [f"p{n}-{i}" for n in range(2) for i in range(PER_PROCESS)])
    assert [e.seq for e in snap.entries] == list(range(1 + 2 * PER_PROCESS))
    for n in range(2):
        assert [t for t in texts if t.startswith(f"p{n}-")] == [f"p{n}-{i}" for i in range(PER_PROCESS)]
    assert snap.state.model_call_count == 2 * PER_PROCESS
    assert snap.state.version == 1 + 4 * PER_PROCESS
    assert [h.message.plain_text for h in store.history("race", "a")] == texts
