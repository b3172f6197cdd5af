"""The mapping between ADK events and ledger messages: lossless, and the model input a view renders to."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.errors import ConfigurationError
from contextledger.integrations.adk import (
    adk_ids,
    content_of,
    contents_of,
    event_to_message,
    kept_event,
    ledger_session_id,
)
from contextledger.model.messages import Message
from contextledger.model.records import SummaryEntry, ViewEntry

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_ids = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12)


@st.composite
def _parts(draw: st.DrawFn) -> list[types.Part]:
    kinds = draw(st.lists(st.sampled_from(["text", "thought", "call", "response", "bytes"]), min_size=1, max_size=4))
    parts = []
    for kind in kinds:
        if kind == "text":
            parts.append(types.Part(text=draw(_text)))
        elif kind == "thought":
            parts.append(types.Part(text=draw(_text), thought=True, thought_signature=draw(st.binary(max_size=8))))
        elif kind == "call":
            args = draw(st.dictionaries(_text, _json, max_size=3))
            parts.append(types.Part(function_call=types.FunctionCall(id=draw(_ids), name="tool", args=args)))
        elif kind == "response":
            response = draw(st.dictionaries(_text, _json, max_size=3))
            parts.append(
                types.Part(function_response=types.FunctionResponse(id=draw(_ids), name="tool", response=response))
            )
        else:
            parts.append(types.Part.from_bytes(data=draw(st.binary(max_size=16)), mime_type="image/png"))
    return parts


@st.composite
def _events(draw: st.DrawFn) -> Event:
    content = None
    if draw(st.booleans()):
        content = types.Content(role=draw(st.sampled_from(["user", "model"])), parts=draw(_parts()))
    delta = draw(st.dictionaries(_text, _json, max_size=3))
    return Event(
        invocation_id=draw(_ids),
        author=draw(st.sampled_from(["user", "assistant", "helper"])),
        content=content,
        actions=EventActions(state_delta=delta),
        timestamp=draw(st.floats(0, 2e9)),
        branch=draw(st.none() | _ids),
    )


@settings(deadline=None)
@given(event=_events())
def test_an_event_survives_the_ledger_s_json_round_trip(event: Event) -> None:
    message = event_to_message(event)
    stored = Message.from_record(json.loads(json.dumps(message.to_record())))  # what every store gives back
    assert kept_event(stored) == event
    assert stored.message_id == event.id
    # The model sees the event's own content, untouched, when it has something to show.
    rendered = content_of(stored)
    if rendered is not None:
        assert rendered == event.content


_parts_of_ids = st.text(st.sampled_from("ab/%2F5é𐀀:"), min_size=1, max_size=20)


@settings(deadline=None)
@given(
    first=st.tuples(_parts_of_ids, _parts_of_ids, _parts_of_ids),
    second=st.tuples(_parts_of_ids, _parts_of_ids, _parts_of_ids),
)
def test_ledger_session_ids_are_one_to_one(first: tuple[str, str, str], second: tuple[str, str, str]) -> None:
    key = ledger_session_id(*first)
    assert adk_ids(key) == first
    assert (key == ledger_session_id(*second)) == (first == second)


def test_ledger_session_ids_read_well_and_refuse_what_cannot_be_one() -> None:
    assert ledger_session_id("shop", "ada", "s1") == "shop/ada/s1"
    assert ledger_session_id("a/b", "c%", "é") == "a%2Fb/c%25/é"
    with pytest.raises(ConfigurationError):
        ledger_session_id("", "ada", "s1")
    with pytest.raises(ConfigurationError, match="at most 255"):
        ledger_session_id("app", "user", "x" * 300)
    with pytest.raises(ConfigurationError):
        adk_ids("no-slashes")


def _entry(message: Message, seq: int) -> ViewEntry:
    return ViewEntry(entry_id=message.message_id, seq=seq, message=message)


def test_a_revised_response_reaches_the_model_as_revised_and_the_rest_as_stored() -> None:
    call = Event(
        author="agent",
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(id="c1", name="lookup", args={"q": "x"}), thought_signature=b"sig"
                )
            ],
        ),
    )
    response = Event(
        author="agent",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(id="c1", name="lookup", response={"long": "x" * 50})
                )
            ],
        ),
    )
    truncated = event_to_message(response).with_content(
        [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "[truncated]"}]}}]
    )
    rendered = contents_of([_entry(event_to_message(call), 0), _entry(truncated, 1)])
    assert rendered[0] == call.content  # the call untouched, its thought signature included
    (part,) = rendered[1].parts or []
    assert part.function_response == types.FunctionResponse(id="c1", name="lookup", response={"result": "[truncated]"})


def test_what_never_was_an_event_is_rendered_from_its_blocks() -> None:
    call = Event(
        author="agent",
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(id="c9", name="book", args={}))]
        ),
    )
    repair = Message.tool_result("c9", "interrupted", status="error")
    summary = SummaryEntry(
        session_id="s",
        agent_id="a",
        seq=0,
        content="earlier: a trip",
        summarizer="t",
        reduction_id="r",
        replaces=("x",),
    )
    state_only = Event(author="user", actions=EventActions(state_delta={"k": 1}))
    entries = [
        ViewEntry(entry_id=summary.summary_id, kind="summary", seq=0, message=summary.to_message()),
        _entry(event_to_message(state_only), 1),
        _entry(event_to_message(call), 2),
        _entry(repair, 3),
    ]
    rendered = [c.model_dump(mode="json", exclude_none=True) for c in contents_of(entries)]
    expected: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "earlier: a trip"}]},
        {"role": "model", "parts": [{"function_call": {"id": "c9", "name": "book", "args": {}}}]},
        {
            "role": "user",
            "parts": [{"function_response": {"id": "c9", "name": "book", "response": {"result": "interrupted"}}}],
        },
    ]
    assert rendered == expected


def test_usage_is_copied_where_proactive_compression_reads_it() -> None:
    event = Event(
        author="agent",
        content=types.Content(role="model", parts=[types.Part(text="hi")]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=120, candidates_token_count=8),
    )
    assert event_to_message(event).usage == {"inputTokens": 120, "outputTokens": 8, "totalTokens": 128}
    assert event_to_message(Event(author="user")).usage is None


def test_events_read_back_hold_plain_mutable_values() -> None:
    event = Event(
        author="agent",
        content=types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(id="c1", name="f", args={"items": [1, {"a": 2}]}))],
        ),
        actions=EventActions(state_delta={"cart": {"items": [1]}}),
    )
    stored = Message.from_record(json.loads(json.dumps(event_to_message(event).to_record())))
    back = kept_event(stored)
    assert back is not None
    back.actions.state_delta["cart"]["items"].append(2)  # as a tool or callback may do
    assert back.content is not None
    (part,) = back.content.parts or []
    assert part.function_call is not None
    assert part.function_call.args is not None
    part.function_call.args["items"][1]["b"] = 3
    assert type(back.actions.state_delta["cart"]) is dict
