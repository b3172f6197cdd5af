"""ADK's ``BaseSessionService`` contract, as ADK's own session-service tests state it, on every service.

Each test runs on the ledger's service over every backend and on ADK's in-memory and
database services: the behaviour asserted is ADK's, and the ledger's service shows it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService, InMemorySessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

pytestmark = pytest.mark.anyio

APP, USER = "my_app", "test_user"


def _text_event(text: str, **fields: object) -> Event:
    return Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        **fields,
    )


async def test_get_empty_session(session_service: BaseSessionService) -> None:
    assert not await session_service.get_session(app_name=APP, user_id=USER, session_id="123")


async def test_create_get_session(session_service: BaseSessionService) -> None:
    state = {"key": "value"}
    session = await session_service.create_session(app_name=APP, user_id=USER, state=state)
    assert session.app_name == APP
    assert session.user_id == USER
    assert session.id
    assert session.state == state
    assert session.last_update_time <= datetime.now(UTC).timestamp()
    got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got == session
    await session_service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
    assert await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id) is None


async def test_create_and_list_sessions(session_service: BaseSessionService) -> None:
    session_ids = [f"session{i}" for i in range(5)]
    for session_id in session_ids:
        await session_service.create_session(
            app_name=APP, user_id=USER, session_id=session_id, state={"key": "value" + session_id}
        )
    sessions = (await session_service.list_sessions(app_name=APP, user_id=USER)).sessions
    assert {s.id for s in sessions} == set(session_ids)
    for session in sessions:
        assert session.state == {"key": "value" + session.id}
        assert session.events == []


async def test_list_sessions_all_users(session_service: BaseSessionService) -> None:
    for user, session_id in (("user1", "session1a"), ("user1", "session1b"), ("user2", "session2a")):
        await session_service.create_session(
            app_name=APP, user_id=user, session_id=session_id, state={"key": "value" + session_id[-2:]}
        )
    first = {s.id: s.state for s in (await session_service.list_sessions(app_name=APP, user_id="user1")).sessions}
    assert first == {"session1a": {"key": "value1a"}, "session1b": {"key": "value1b"}}
    second = (await session_service.list_sessions(app_name=APP, user_id="user2")).sessions
    assert [(s.id, s.state) for s in second] == [("session2a", {"key": "value2a"})]
    everyone = {s.id: (s.user_id, s.state) for s in (await session_service.list_sessions(app_name=APP)).sessions}
    assert everyone == {
        "session1a": ("user1", {"key": "value1a"}),
        "session1b": ("user1", {"key": "value1b"}),
        "session2a": ("user2", {"key": "value2a"}),
    }
    assert (await session_service.list_sessions(app_name="other_app")).sessions == []


async def test_list_sessions_ordered_by_last_update_time(session_service: BaseSessionService) -> None:
    for session_id in ("a", "b", "c"):
        await session_service.create_session(app_name=APP, user_id=USER, session_id=session_id)
    a = await session_service.get_session(app_name=APP, user_id=USER, session_id="a")
    assert a is not None
    await session_service.append_event(a, Event(author="user", timestamp=a.last_update_time + 100))
    assert [s.id for s in (await session_service.list_sessions(app_name=APP, user_id=USER)).sessions] == ["b", "c", "a"]


async def test_app_state_is_shared_by_all_users_of_app(session_service: BaseSessionService) -> None:
    session1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"app:k1": "v1"})
    await session_service.append_event(
        session1, Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"app:k2": "v2"}))
    )
    session2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert session2.state == {"app:k1": "v1", "app:k2": "v2"}
    got = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"app:k1": "v1", "app:k2": "v2"}


async def test_user_state_is_shared_only_by_user_sessions(session_service: BaseSessionService) -> None:
    session1 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await session_service.append_event(
        session1, Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"user:k2": "v2"}))
    )
    session1b = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert session1b.state == {"user:k1": "v1", "user:k2": "v2"}
    session2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert session2.state == {}


async def test_session_state_is_not_shared(session_service: BaseSessionService) -> None:
    session1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1", state={"sk1": "v1"})
    await session_service.append_event(
        session1, Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"sk2": "v2"}))
    )
    got = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"sk1": "v1", "sk2": "v2"}
    session1b = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert session1b.state == {}


async def test_state_deltas_of_every_scope(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id="user1", state={"key11": "value11"})
    await session_service.create_session(app_name=APP, user_id="user1", state={"key12": "value12"}, session_id="s12")
    await session_service.create_session(app_name=APP, user_id="user2", session_id="s2")
    delta = {"app:key": "value", "user:key1": "value1", "temp:key": "temp", "key11": "value11_new"}
    await session_service.append_event(session, _text_event("text", actions=EventActions(state_delta=delta)))
    # The session in hand sees every change, temp included for the rest of its invocation.
    assert session.state["app:key"] == "value"
    assert session.state["key11"] == "value11_new"
    assert session.state["user:key1"] == "value1"
    assert session.state["temp:key"] == "temp"
    s12 = await session_service.get_session(app_name=APP, user_id="user1", session_id="s12")
    assert s12 is not None
    assert s12.state == {"key12": "value12", "app:key": "value", "user:key1": "value1"}
    s2 = await session_service.get_session(app_name=APP, user_id="user2", session_id="s2")
    assert s2 is not None
    assert s2.state == {"app:key": "value"}
    again = await session_service.get_session(app_name=APP, user_id="user1", session_id=session.id)
    assert again is not None
    assert again.state == {"key11": "value11_new", "app:key": "value", "user:key1": "value1"}


async def test_temp_state_is_not_persisted_in_state_or_events(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    event = Event(invocation_id="inv1", author="user", actions=EventActions(state_delta={"temp:k1": "v1", "sk": "v2"}))
    await session_service.append_event(session, event)
    got = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state.get("sk") == "v2"
    assert "temp:k1" not in got.state
    assert "temp:k1" not in got.events[0].actions.state_delta
    assert got.events[0].actions.state_delta.get("sk") == "v2"


async def test_get_session_respects_user_id(session_service: BaseSessionService) -> None:
    session1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    await session_service.append_event(session1, Event(invocation_id="inv1", author="user"))
    await session_service.create_session(app_name=APP, user_id="u2", session_id="s1")
    got = await session_service.get_session(app_name=APP, user_id="u2", session_id="s1")
    assert got is not None
    assert got.user_id == "u2"
    assert got.events == []
    first = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert first is not None
    assert len(first.events) == 1


async def test_create_session_with_existing_id_raises_error(session_service: BaseSessionService) -> None:
    await session_service.create_session(app_name=APP, user_id=USER, session_id="existing_session")
    with pytest.raises(AlreadyExistsError):
        await session_service.create_session(app_name=APP, user_id=USER, session_id="existing_session")


async def test_append_event_bytes(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    content = types.Content(role="user", parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")])
    grounding = types.GroundingMetadata(search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob"))
    await session_service.append_event(
        session, Event(invocation_id="invocation", author="user", content=content, grounding_metadata=grounding)
    )
    assert session.events[0].content == content
    got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got is not None
    assert len(got.events) == 1
    assert got.events[0].content == content
    assert got.events[0].grounding_metadata == grounding


async def test_append_event_complete(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    await session_service.append_event(session, event)
    assert await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id) == session


async def test_function_calls_and_responses_round_trip(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    call = types.Part(function_call=types.FunctionCall(id="adk-1", name="lookup", args={"city": "Paris", "n": [1, 2]}))
    response = types.Part(
        function_response=types.FunctionResponse(id="adk-1", name="lookup", response={"weather": "sunny", "ok": True})
    )
    thought = types.Part(text="thinking", thought=True, thought_signature=b"\x00sig")
    events = [
        _text_event("weather?"),
        Event(invocation_id="invocation", author="agent", content=types.Content(role="model", parts=[thought, call])),
        Event(invocation_id="invocation", author="agent", content=types.Content(role="user", parts=[response])),
        Event(
            invocation_id="invocation",
            author="agent",
            content=types.Content(role="model", parts=[types.Part(text="Sunny.")]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=12, candidates_token_count=3),
        ),
    ]
    for event in events:
        await session_service.append_event(session, event)
    got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got is not None
    assert got.events == events
    assert [(e.id, e.author, e.invocation_id, e.timestamp) for e in got.events] == [
        (e.id, e.author, e.invocation_id, e.timestamp) for e in events
    ]


async def test_session_last_update_time_updates_on_event(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    original = session.last_update_time
    event_timestamp = original + 10
    await session_service.append_event(
        session, Event(invocation_id="invocation", author="user", timestamp=event_timestamp)
    )
    assert session.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    refreshed = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert refreshed is not None
    assert refreshed.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    assert refreshed.last_update_time > original


async def test_append_event_to_stale_session(session_service: BaseSessionService) -> None:
    if isinstance(session_service, InMemorySessionService):
        pytest.skip("ADK's in-memory service keeps one session object per id: it has no stale copies to refuse")
    now = datetime.now(UTC).timestamp()
    original = await session_service.create_session(app_name=APP, user_id=USER)
    delta1 = EventActions(state_delta={"sk1": "v1"})
    await session_service.append_event(
        original, Event(invocation_id="inv1", author="user", timestamp=now + 1, actions=delta1)
    )
    updated = await session_service.get_session(app_name=APP, user_id=USER, session_id=original.id)
    assert updated is not None
    delta2 = EventActions(state_delta={"sk2": "v2"})
    await session_service.append_event(
        updated, Event(invocation_id="inv2", author="user", timestamp=now + 2, actions=delta2)
    )
    assert original.last_update_time < updated.last_update_time
    with pytest.raises(StaleSessionError, match="modified in storage since it was loaded"):
        await session_service.append_event(original, Event(invocation_id="inv3", author="user", timestamp=now + 3))
    final = await session_service.get_session(app_name=APP, user_id=USER, session_id=original.id)
    assert final is not None
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
    assert "sk3" not in final.state
    # A session loaded again is current: its append is taken.
    await session_service.append_event(final, Event(invocation_id="inv3", author="user", timestamp=now + 3))
    assert len(final.events) == 3


async def test_get_session_with_config(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    for i in range(1, 6):
        await session_service.append_event(session, Event(author="user", timestamp=i))

    async def events(config: GetSessionConfig | None) -> list[float]:
        got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id, config=config)
        assert got is not None
        return [e.timestamp for e in got.events]

    assert await events(None) == [1, 2, 3, 4, 5]
    assert await events(GetSessionConfig(num_recent_events=3)) == [3, 4, 5]
    assert await events(GetSessionConfig(num_recent_events=0)) == []
    assert await events(GetSessionConfig(after_timestamp=4.0)) == [4, 5]
    assert await events(GetSessionConfig(after_timestamp=50)) == []
    assert await events(GetSessionConfig(after_timestamp=4.0, num_recent_events=3)) == [4, 5]
    assert await events(GetSessionConfig(after_timestamp=2.0, num_recent_events=2)) == [4, 5]


async def test_partial_events_are_not_persisted(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    await session_service.append_event(session, Event(author="user", partial=True))
    assert session.events == []
    got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got is not None
    assert got.events == []


async def test_appending_to_a_missing_session_raises(session_service: BaseSessionService) -> None:
    ghost = Session(id="ghost", app_name=APP, user_id=USER)
    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(ghost, Event(author="user"))
    session = await session_service.create_session(app_name=APP, user_id=USER)
    await session_service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(session, Event(author="user"))
    assert await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id) is None


async def test_an_equal_event_delivered_again_is_stored_once(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    event = _text_event("once", actions=EventActions(state_delta={"count": 1}))
    await session_service.append_event(session, event)
    again = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert again is not None
    await session_service.append_event(again, event.model_copy(deep=True))
    got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got is not None
    assert [e.id for e in got.events] == [event.id]


async def test_get_user_state(session_service: BaseSessionService) -> None:
    assert await session_service.get_user_state(app_name=APP, user_id="user-42") == {}
    session = await session_service.create_session(app_name=APP, user_id="user-42")
    for value in (1, 2):
        delta = {"user:profile": {"name": "Alice"}, "user:counter": value, "session_key": 1}
        await session_service.append_event(session, Event(author="system", actions=EventActions(state_delta=delta)))
    assert await session_service.get_user_state(app_name=APP, user_id="user-42") == {
        "profile": {"name": "Alice"},
        "counter": 2,
    }
    assert await session_service.get_user_state(app_name=APP, user_id="user-99") == {}


async def test_concurrent_appends_to_one_session_keep_every_event(session_service: BaseSessionService) -> None:
    session = await session_service.create_session(app_name=APP, user_id=USER)
    events = [_text_event(f"event {i}", actions=EventActions(state_delta={f"k{i}": i})) for i in range(8)]
    await asyncio.gather(*(session_service.append_event(session, e) for e in events))
    got = await session_service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got is not None
    assert sorted(e.id for e in got.events) == sorted(e.id for e in events)
    assert got.state == {f"k{i}": i for i in range(8)}
