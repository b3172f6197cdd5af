"""``ItemRenderer``: a view rendered again checks no fingerprint twice, and never serves a stale item.

* ``LedgerSession.get_items`` on an open session checks each message's fingerprint once
  (counted), also when the view is restored from SQLite and builds its messages anew;
* a message a manager revised since is rendered from its new content, with the
  renderer's memory of the old one ignored;
* the same view read again is not rendered again (its items are copied from what was
  rendered, counted), and the copies are the caller's;
* a hypothesis property: after any mix of appends, revisions, evictions and writes by
  another handle, a renderer that rendered every view before gives exactly what
  :func:`messages_to_items` gives for the view now, with and without a limit.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger
from contextledger.aio import AsyncLedger
from contextledger.core.changeset import ContentRevision, ReductionPlan
from contextledger.core.view import View
from contextledger.integrations.kept import unchanged
from contextledger.integrations.openai_agents import LedgerSession, ScriptedModel, rendering
from contextledger.integrations.openai_agents.items import items_to_messages
from contextledger.integrations.openai_agents.rendering import (
    ItemRenderer,
    item_groups,
    messages_to_items,
    newest_messages,
)
from tests.soak import examples


def _turn(n: int) -> list[Any]:
    return [
        {"role": "user", "content": f"question {n}"},
        {"type": "function_call", "call_id": f"c{n}", "name": "lookup", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": f"c{n}", "output": f"result {n} " * 5},
        {"role": "assistant", "content": f"answer {n}"},
    ]


class CountingChecks:
    """Counts the fingerprint checks of the renderer (the real check, counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        check = unchanged

        def counted(message: Any, key: str) -> bool:
            self.count += 1
            return check(message, key)

        monkeypatch.setattr(rendering, "unchanged", counted)


class CountingViews:
    """Counts the views the renderer renders (the messages it takes from a view)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        take = rendering.newest_messages

        def counted(view: View, limit: int | None) -> list[Any]:
            self.count += 1
            return take(view, limit)

        monkeypatch.setattr(rendering, "newest_messages", counted)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_an_open_session_checks_each_fingerprint_once(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'l.db'}"

    async def run() -> None:
        ledger = await AsyncLedger.connect(url)
        writer = LedgerSession("s", ledger=ledger)
        for n in range(5):
            await writer.add_items(_turn(n))
        session = LedgerSession("s", ledger=ledger)  # restored from the store: built anew on each read
        checks = CountingChecks(monkeypatch)
        first: list[Any] = await session.get_items()
        assert checks.count == 20
        built = CountingViews(monkeypatch)
        for _ in range(3):
            again_items: list[Any] = await session.get_items()
            assert again_items == first
            again_items[0]["content"] = "changed by the caller"  # a copy: the next read is not changed
        assert checks.count == 20  # no message checked again
        assert built.count == 0  # the view nothing moved is not rendered again: its items are copied
        await writer.add_items(_turn(5))  # another session's write: the view moved
        again: list[Any] = await session.get_items()
        assert again[:20] == first
        assert [item.get("call_id") for item in again[20:]] == [None, "c5", "c5", None]
        assert checks.count == 24  # the four new messages only
        assert built.count == 1
        await ledger.close()

    asyncio.run(run())


def test_a_message_revised_since_is_rendered_from_its_new_content(tmp_path: Path) -> None:
    async def run() -> None:
        ledger = await AsyncLedger.connect(f"sqlite:///{tmp_path / 'l.db'}")
        session = LedgerSession("s", ledger=ledger)
        await session.add_items(_turn(0))
        before: list[Any] = await session.get_items()
        assert before[2]["output"] == "result 0 " * 5
        chat = ledger.sync.conversation("s", "default")
        output = chat.view[2].message
        cut = {"toolUseId": "c0", "status": "success", "content": [{"text": "cut"}]}
        chat.apply_plan(
            lambda _view: ReductionPlan(
                strategy="truncate",
                revisions=(ContentRevision(message_id=output.message_id, content=[{"toolResult": cut}]),),
            ),
            trigger="manual",
        )
        after: list[Any] = await session.get_items()
        assert after[2] == {**before[2], "output": "cut"}
        assert after[:2] == before[:2]
        assert after[3] == before[3]
        await ledger.close()

    asyncio.run(run())


def test_runs_of_the_sdks_runner_check_each_fingerprint_once_and_see_each_call_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's own Runner drives a session reopened from the file (a restored view, whose
    # messages are built anew on each read), with the model calls counted and managed by
    # the input filter: every model call is given exactly the view the ledger records for
    # it, and no message's fingerprint is checked twice over the runs.
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    model = ScriptedModel([f"answer {n}" for n in range(4)])
    agent = Agent(name="Assistant", model=model)

    async def run() -> tuple[list[list[Any]], int, int]:
        async with await AsyncLedger.connect(url) as ledger:
            await LedgerSession("u", ledger=ledger).add_items(_turn(0))
        checks = CountingChecks(monkeypatch)
        async with await AsyncLedger.connect(url) as ledger:
            session = LedgerSession("u", ledger=ledger)
            for n in range(1, 5):
                result = await Runner.run(agent, f"question {n}", session=session, run_config=session.run_config())
                assert result.final_output == f"answer {n - 1}"
            stored = len(await session.get_items())
            checked = checks.count  # before the views below are rendered for the comparison
            seen = [messages_to_items(ledger.sync.view_at("u", model_call=n).messages) for n in range(1, 5)]
        return seen, checked, stored

    seen, checked, stored = asyncio.run(run())
    assert [call.input for call in model.calls] == seen
    assert checked <= stored  # each message at most once, however many reads and calls rendered it


steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("revise"), st.integers(0, 40)),
        st.tuples(st.just("evict"), st.integers(1, 6)),
        st.tuples(st.just("render"), st.just(0)),
    ),
    max_size=14,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_a_renderer_gives_what_a_fresh_rendering_gives(steps: list[tuple[str, int]], tmp_path: Path) -> None:
    with Ledger.connect(f"sqlite:///{tmp_path / 'p.db'}") as ledger:
        session = f"p-{uuid.uuid4().hex}"  # the file outlives an example: a session of its own each
        mine = ledger.conversation(session)
        renderer = ItemRenderer()
        turn = 0

        def check(view: View) -> None:
            assert renderer.groups(view.messages) == item_groups(view.messages), steps
            # Asked again, from what was rendered; a moved view is first asked as the last was.
            for limit in (None, 3, 3, None, None):
                expected = messages_to_items(newest_messages(view, limit))
                assert renderer.view_items(view, limit) == expected, (steps, limit)

        for step, size in steps:
            other = ledger.conversation(session)  # another handle: its view is restored from the file
            if step == "append":
                for _ in range(size):
                    other.append(*items_to_messages(_turn(turn)))
                    turn += 1
            elif step == "revise" and len(other.view):
                entry = other.view[size % len(other.view)]
                content: list[dict[str, Any]] = [*entry.message.content, {"text": f"revised {size}"}]
                if entry.message.tool_result_ids:  # a tool output: its revised text reaches the host
                    (call,) = entry.message.tool_result_ids
                    result = {"toolUseId": call, "status": "success", "content": [{"text": f"cut {size}"}]}
                    content = [{"toolResult": result}]
                other.apply_plan(
                    lambda _view, entry=entry, content=content: ReductionPlan(  # type: ignore[misc]
                        strategy="truncate", revisions=(ContentRevision(message_id=entry.entry_id, content=content),)
                    ),
                    trigger="manual",
                )
            elif step == "evict" and len(other.view):
                other.apply_plan(
                    lambda view, size=size: ReductionPlan(  # type: ignore[misc]
                        strategy="sliding_window", evict=tuple(view.ids[: 4 * min(size, len(view) // 4)])
                    ),
                    trigger="manual",
                )
            mine.refresh()
            check(mine.view)
