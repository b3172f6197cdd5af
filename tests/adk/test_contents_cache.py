"""The model contents the ADK plugin renders are parsed once per message, and are what rendering afresh gives.

``contents_of(view, rendered)`` keeps, across the model calls of one conversation, the
contents of the messages shown as their kept event's content; every content it returns
is a new object. These tests count the kept events parsed, compare with rendering
afresh after appends, revisions and evictions, and check that a caller changing a
returned content changes nothing the next call returns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from google.adk.events import Event
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger
from contextledger.core.changeset import ContentRevision, ReductionPlan
from contextledger.core.view import View
from contextledger.errors import InvalidPlan
from contextledger.integrations.adk import LedgerSessionService, event_to_message
from contextledger.integrations.adk import core as adk_core
from contextledger.integrations.adk import events as adk_events
from contextledger.integrations.adk.events import Rendered, contents_of
from tests.adk.scenarios import APP, USER, build, say
from tests.soak import examples


def _text(text: str, role: str = "user") -> Event:
    return Event(
        author=role if role == "user" else "assistant", content=types.Content(role=role, parts=[types.Part(text=text)])
    )


def _call(n: int) -> list[Event]:
    call = types.FunctionCall(id=f"call-{n}", name="lookup", args={"city": f"c{n}", "n": n})
    response = types.FunctionResponse(id=f"call-{n}", name="lookup", response={"forecast": f"sunny {n}"})
    return [
        Event(author="assistant", content=types.Content(role="model", parts=[types.Part(function_call=call)])),
        Event(author="assistant", content=types.Content(role="user", parts=[types.Part(function_response=response)])),
    ]


def _given(plan: ReductionPlan) -> Callable[[View], ReductionPlan]:
    """A planner giving ``plan`` whatever the view."""
    return lambda _view: plan


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the kept events the renderer parses (one element per parse)."""
    parsed: list[int] = []
    real = adk_events.kept_event

    def counted(message: Any) -> Event | None:
        parsed.append(1)
        return real(message)

    monkeypatch.setattr(adk_events, "kept_event", counted)
    return parsed


def test_a_second_render_parses_nothing_and_hands_out_new_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger.connect("memory://") as ledger:
        conversation = ledger.conversation("cache")
        conversation.append(event_to_message(_text("hello")), *(event_to_message(e) for e in _call(1)))
        parsed = _parses(monkeypatch)
        rendered: Rendered = {}
        first = contents_of(conversation.view, rendered)
        assert len(parsed) == 3  # each message's kept event, parsed once
        second = contents_of(conversation.view, rendered)
        assert len(parsed) == 3  # nothing parsed again
        assert second == first == contents_of(conversation.view)
        assert all(a is not b for a, b in zip(first, second, strict=True))
        # A caller changing what it was handed (a plugin editing the request) changes nothing later.
        assert first[0].parts is not None
        first[0].parts[0].text = "changed by a plugin"
        assert first[1].parts is not None
        assert first[1].parts[0].function_call is not None
        first[1].parts[0].function_call.args = {"city": "elsewhere"}
        assert contents_of(conversation.view, rendered) == second


def test_a_revised_message_is_rendered_from_its_blocks_and_an_evicted_one_leaves_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Ledger.connect("memory://") as ledger:
        conversation = ledger.conversation("revised")
        messages = [event_to_message(_text(f"m{n}")) for n in range(4)]
        conversation.append(*messages)
        rendered: Rendered = {}
        contents_of(conversation.view, rendered)
        assert set(rendered) == {m.message_id for m in messages}
        revision = ContentRevision(message_id=messages[1].message_id, content=[{"text": "redacted"}], reason="pii")
        conversation.apply_plan(lambda _view: ReductionPlan(strategy="redact", revisions=(revision,)), trigger="manual")
        conversation.apply_plan(
            lambda view: ReductionPlan(strategy="sliding_window", evict=(view.ids[0],)), trigger="manual"
        )
        after = contents_of(conversation.view, rendered)
        assert after == contents_of(conversation.view)
        assert [c.parts[0].text for c in after if c.parts] == ["redacted", "m2", "m3"]
        # the evicted entry is gone; the revised one is rendered from its blocks each time, not kept
        assert set(rendered) == {messages[2].message_id, messages[3].message_id}
        parsed = _parses(monkeypatch)
        contents_of(conversation.view, rendered)
        assert len(parsed) == 1  # the revised message's kept event, once (its parts pair with the blocks)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.sampled_from(["text", "call", "revise", "evict", "render"]), min_size=1, max_size=14))
def test_rendering_with_the_cache_is_rendering_afresh(steps: list[str]) -> None:
    """After any appends, revisions and evictions, the cached render equals a fresh one at every call."""
    with Ledger.connect("memory://") as ledger:
        conversation = ledger.conversation("property")
        rendered: Rendered = {}
        for n, step in enumerate(steps):
            if step == "text":
                conversation.append(event_to_message(_text(f"text {n}", "user" if n % 2 else "model")))
            elif step == "call":
                conversation.append(*(event_to_message(e) for e in _call(n)))
            elif step == "revise" and len(conversation.view) > 0:
                target = conversation.view[-1]
                if "text" in target.message.content[0]:
                    revision = ContentRevision(message_id=target.entry_id, content=[{"text": f"revised {n}"}])
                    conversation.apply_plan(
                        _given(ReductionPlan(strategy="edit", revisions=(revision,))), trigger="manual"
                    )
            elif step == "evict" and len(conversation.view) > 2:
                first = conversation.view[0]
                pair = [first.entry_id]
                if first.message.tool_use_ids:  # a call leaves with its response (the view rules)
                    pair.append(conversation.view[1].entry_id)
                with contextlib.suppress(InvalidPlan):  # one the view rules refuse (the view would open badly)
                    plan = ReductionPlan(strategy="sliding_window", evict=tuple(pair))
                    conversation.apply_plan(_given(plan), trigger="manual")
            assert contents_of(conversation.view, rendered) == contents_of(conversation.view)
            assert set(rendered) <= set(conversation.view.ids)


@pytest.mark.anyio
async def test_a_service_keeps_the_rendered_contents_of_its_last_sessions_only(sqlite_url: str) -> None:
    async with LedgerSessionService(sqlite_url) as service:
        for n in range(adk_core.RENDERED_KEPT + 2):
            runner, _model = build(service, [f"answer {n}"])
            await service.create_session(app_name=APP, user_id=USER, session_id=f"s{n}")
            await say(runner, f"s{n}", f"question {n}")
        core = await service.core()
        kept = core._rendered  # the memory bound itself (about 3 KB an entry of a view)
        assert len(kept) == adk_core.RENDERED_KEPT
        assert all(len(rendered) == 1 for _conversation, rendered in kept.values())  # each view: its question
