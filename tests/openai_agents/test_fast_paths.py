"""``LedgerSession`` takes the ledger's own fast paths, and a restore hands items back without decoding them.

* ``add_items`` appends as a conversation the ledger opened does, also when the SDK's
  ``Runner`` drives the session: inline on SQLite and in memory (no hop to a worker
  thread), counted by the ledger's runner;
* an item is kept with the fingerprint of the content it was stored with, so
  ``get_items`` after a restore tells every unrevised message by hashing the text it
  read: the content is never decoded (the restored messages still hold their text);
* an item kept without a fingerprint (written before 0.3) still comes back exactly, and a
  revision of it is still seen.

Speed is measured in ``benchmarks/``; these tests count hops and decodes.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from agents.run import CallModelData, ModelInputData
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.errors import ConfigurationError
from contextledger.integrations.openai_agents import LedgerSession, ScriptedModel
from contextledger.integrations.openai_agents.items import (
    ITEM_KEY,
    item_to_message,
    items_to_messages,
    project_item,
)
from contextledger.integrations.openai_agents.rendering import (
    message_to_items,
    messages_to_items,
)
from contextledger.model.jsonvalues import thaw
from contextledger.model.pending import held_text
from contextledger.stores.memory import MemoryStore
from tests.openai_agents.strategies import any_item
from tests.soak import examples


def _turn(n: int) -> list[Any]:
    """Turn ``n`` as Responses input items (``Any``: the SDK types an item as a union of TypedDicts)."""
    return [
        {"role": "user", "content": f"question {n}"},
        {"type": "function_call", "call_id": f"c{n}", "name": "lookup", "arguments": f'{{"n": {n}}}'},
        {"type": "function_call_output", "call_id": f"c{n}", "output": f"result {n} " + "x" * 40},
        {"role": "assistant", "content": f"answer {n}"},
    ]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_add_items_appends_inline_as_the_ledgers_own_conversations_do(backend: str, tmp_path: Path) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path}/inline.db"

    async def main() -> tuple[int, int]:
        async with await AsyncLedger.connect(url) as ledger:
            session = LedgerSession("s", ledger=ledger)
            await session.add_items(_turn(0))  # opens the conversation; its first commit claims the session
            runner = ledger.runner
            calls, inline = runner.calls, runner.inline  # jobs handed to workers, calls run on the loop's thread
            for n in range(1, 4):
                await session.add_items(_turn(n))
            counted = runner.calls - calls, runner.inline - inline
            assert await session.get_items() == [item for n in range(4) for item in _turn(n)]
            return counted

    assert asyncio.run(main()) == (0, 3)  # three appends, none handed to a worker


def test_wrap_gives_the_fast_paths_of_the_ledger_and_refuses_another_store(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path}/wrap.db") as ledger:
            wrapped = ledger.wrap(ledger.sync.conversation("s"))
            assert isinstance(wrapped, AsyncConversation)
            with pytest.raises(ConfigurationError, match="this ledger's store"):
                ledger.wrap(Ledger(MemoryStore()).conversation("s"))
            with pytest.raises(ConfigurationError, match="this ledger's store"):
                ledger.wrap(await ledger.conversation("s"))  # type: ignore[arg-type]  # an async one is not a sync one
            await wrapped.append(Message.user("first"))  # claims the session: a worker's job
            runner = ledger.runner
            calls, inline = runner.calls, runner.inline
            for n in range(3):
                await wrapped.append(Message.user(f"message {n}"))
            return runner.calls - calls, runner.inline - inline

    assert asyncio.run(main()) == (0, 3)  # inline, as a conversation the ledger opens appends


def test_a_restore_hands_items_back_without_decoding_their_content(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/restore.db"
    items = [item for n in range(5) for item in _turn(n)]

    async def write() -> None:
        async with await AsyncLedger.connect(url) as ledger:
            await LedgerSession("s", ledger=ledger).add_items(items)

    asyncio.run(write())
    with Ledger.connect(url) as ledger:
        messages = ledger.conversation("s").messages
        assert all(held_text(m) is not None for m in messages)  # restored, still text
        assert messages_to_items(messages) == items
        assert all(held_text(m) is not None for m in messages)  # not decoded to tell them unchanged


def test_an_item_kept_without_a_fingerprint_still_comes_back_and_its_revision_is_seen() -> None:
    item = {"type": "function_call_output", "call_id": "c1", "output": "the whole result", "x_extra": [1, 2]}
    stored = item_to_message(item)
    assert set(stored.metadata[ITEM_KEY]) == {"item", "text_digest"}
    # As 0.2 kept it: the item alone.
    old = Message(role=stored.role, content=thaw(stored.content), metadata={ITEM_KEY: {"item": item}})
    assert message_to_items(old) == [item]
    revised = old.with_content([{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "cut"}]}}])
    assert project_item(item) != (revised.role, revised.content)
    assert message_to_items(revised) == [{**item, "output": "cut"}]
    # With a fingerprint, the same revision is told from the content's text.
    assert message_to_items(stored.with_content(revised.content)) == [{**item, "output": "cut"}]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(any_item, min_size=1, max_size=6))
def test_items_restored_from_a_sqlite_file_come_back_exactly_from_their_text(items: list[dict[str, Any]]) -> None:
    # The fingerprint is taken of the content as given, the check of the text SQLite wrote:
    # every item of every type comes back equal, told unrevised without decoding it.
    with tempfile.TemporaryDirectory() as directory, Ledger.connect(f"sqlite:///{directory}/items.db") as ledger:
        ledger.conversation("s").append(*items_to_messages(items))
        messages = Ledger(ledger.store).conversation("s").messages
        assert messages_to_items(messages) == items
        assert all(held_text(m) is not None for m in messages)


def test_runs_of_the_sdks_runner_append_inline_on_sqlite(tmp_path: Path) -> None:
    # The SDK's own Runner drives the session: after the run that creates the
    # conversation, every add_items it makes runs on the loop's thread, and each model
    # call was given exactly the session's items so far.
    model = ScriptedModel([f"answer {n}" for n in range(4)])
    agent = Agent(name="Assistant", model=model)

    async def main() -> tuple[int, int, list[Any]]:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path}/runner.db") as ledger:
            session = LedgerSession("u", ledger=ledger)
            await Runner.run(agent, "question 0", session=session)
            runner = ledger.runner
            inline = runner.inline
            for n in range(1, 4):
                result = await Runner.run(agent, f"question {n}", session=session)
                assert result.final_output == f"answer {n}"
            return runner.inline - inline, len(model.calls), await session.get_items()

    appended, calls, items = asyncio.run(main())
    assert appended == 2 * 3  # each run stores its input, then the model's output: all on the loop's thread
    assert calls == 4
    assert model.calls[-1].input == items[: len(model.calls[-1].input)]
    assert [i["content"] for i in items if i.get("role") == "user"] == [f"question {n}" for n in range(4)]


def _unchanged(data: CallModelData[Any]) -> ModelInputData:
    """An application's input filter that changes nothing."""
    return data.model_data


@pytest.mark.parametrize("application_filter", [False, True])
def test_with_the_input_filter_each_model_call_is_counted_inline_on_sqlite(
    tmp_path: Path, application_filter: bool
) -> None:
    # run_config() sets the session's input filter, which counts each model call: on SQLite
    # that commit runs on the loop's thread as the appends do, one worker call fewer per
    # model call than on a ledger opened with inline=False, with the same count and inputs.
    # With an application's filter too, the call is handed over after it, inline as well.
    async def runs(inline: bool) -> tuple[int, int, int, list[Any]]:
        model = ScriptedModel([f"answer {n}" for n in range(4)])
        agent = Agent(name="Assistant", model=model)
        path = f"{tmp_path}/filter-{inline}.db"
        async with await AsyncLedger.connect(f"sqlite:///{path}", inline=inline) as ledger:
            session = LedgerSession("u", ledger=ledger, input_filter=_unchanged if application_filter else None)
            await Runner.run(agent, "question 0", session=session, run_config=session.run_config())
            runner = ledger.runner
            calls = runner.calls
            for n in range(1, 4):
                result = await Runner.run(agent, f"question {n}", session=session, run_config=session.run_config())
                assert result.final_output == f"answer {n}"
            count = (await session.conversation()).model_call_count
            # the scripted model names its output items at random: compared without their ids
            inputs = [[{k: v for k, v in dict(i).items() if k != "id"} for i in call.input] for call in model.calls]
            return runner.calls - calls, count, len(model.calls), inputs

    inline_calls, count, made, inputs = asyncio.run(runs(True))
    worker_calls, worker_count, _, worker_inputs = asyncio.run(runs(False))
    assert (count, worker_count, made) == (4, 4, 4)
    assert inputs == worker_inputs
    # per run, its input's and its output's appends, its model call's count (and with an
    # application's filter its hand-over) run on the loop's thread (the session's read of
    # its items is a worker's on both)
    assert worker_calls - inline_calls == 3 * (4 if application_filter else 3)
