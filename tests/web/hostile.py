"""A ledger whose every field and id is an attack on the page that shows it.

Written at the lowest level -- changesets committed straight to the store, records the
store keeps as given -- so that what an import would refuse (hostile ids) is still
there for the web view to show. Each payload is tagged with the field it sits in, so a
test can find each one on the page, shown as text.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from contextledger import Ledger, Message
from contextledger.core.changeset import Changeset, ContentRevision
from contextledger.model.records import Reduction, SummaryEntry, ViewEntry
from contextledger.stores.capabilities import CompleteStore, complete

from .png import tiny_png

__all__ = ["AGENTS", "IDS", "SESSION", "build_hostile", "evil", "write_session"]

PROBE = "window.__pwned=(window.__pwned||0)+1"


def evil(field: str) -> str:
    """A payload breaking out of text, attributes, URLs, JSON in a script and templates, tagged ``field``."""
    return (
        f'{field}"\'><script>{PROBE}</script><img src=x onerror="{PROBE}">'
        f"</script><svg onload={PROBE}>javascript:{PROBE}//{{{{7*7}}}}\u2028-->"
    )


SESSION = evil("session")
AGENTS = (evil("agent"), evil("other"))


def _entries(messages: list[Message], start: int = 0) -> tuple[ViewEntry, ...]:
    return tuple(ViewEntry(entry_id=m.message_id, seq=start + i, message=m, tokens=40) for i, m in enumerate(messages))


IDS = ("prompt", "use", "result", "answer", "image", "summary", "reduction", "truncation")
"""The entries and reductions each agent gets, by name."""


def build_hostile(url: str) -> dict[str, str]:
    """Write the hostile session at ``url``; return the ids a test visits (the second agent's end in ``2``)."""
    with Ledger.connect(url) as ledger:
        return write_session(complete(ledger.store, "tests"), SESSION, AGENTS, evil)


def write_session(
    store: CompleteStore, session: str, agents: tuple[str, ...], evil: Callable[[str], str]
) -> dict[str, str]:
    """Write ``session`` with ``agents``, every field and id of it ``evil(name of the field)``.

    Returns the ids of :data:`IDS` (the second agent's carry a ``2`` at the end); each id
    also carries its number, so two fields that draw the same text still make distinct ids.
    """
    ids = {name: evil(f"{name}-id") + f"·{n}" for n, name in enumerate(IDS)}  # ids are at most 255 characters
    for n, agent in enumerate(agents):
        tag = "" if n == 0 else "2"
        prompt = Message(message_id=ids["prompt"] + tag, role="user", content=[{"text": evil("text")}])
        use = Message(
            message_id=ids["use"] + tag,
            role="assistant",
            content=[
                {"text": evil("use-text")},
                {
                    "toolUse": {
                        "toolUseId": evil("tool-use-id"),
                        "name": evil("tool"),
                        "input": {evil("key"): evil("value")},
                    }
                },
            ],
        )
        result = Message(
            message_id=ids["result"] + tag,
            role="user",
            content=[
                {
                    "toolResult": {
                        "toolUseId": evil("tool-use-id"),
                        "status": "error",
                        "content": [{"text": evil("result")}],
                    }
                }
            ],
        )
        image = Message(
            message_id=ids["image"] + tag,
            role="user",
            content=[
                {"image": {"format": evil("format"), "source": {"bytes": tiny_png()}}},
                {"image": {"format": "png", "source": {"bytes": tiny_png()}}},
                {evil("block-kind"): {evil("k"): evil("unknown-block")}},
            ],
            metadata={"custom": {evil("meta-key"): evil("meta-value")}},
        )
        answer = Message(message_id=ids["answer"] + tag, role="assistant", content=[{"text": evil("answer")}])
        first = [prompt, use, result, image, answer]
        store.commit(
            Changeset(
                session_id=session,
                agent_id=agent,
                expected_version=0,
                appends=_entries(first),
                pins={prompt.message_id: True},
                pin_source=evil("pin")[:32],
                model_call_count=2,
                next_seq=len(first),
                manager_state={"manager": evil("manager"), evil("mk"): evil("mv")},
                agent_state={evil("state-key"): evil("state-value")},
            )
        )
        revision = ContentRevision(
            message_id=answer.message_id, content=[{"text": evil("revised")}], reason=evil("why")
        )
        store.commit(
            Changeset(
                session_id=session,
                agent_id=agent,
                expected_version=1,
                evict=(),
                revisions=(revision,),
                reduction=Reduction(
                    reduction_id=ids["truncation"] + tag,
                    session_id=session,
                    agent_id=agent,
                    trigger="per_turn",
                    strategy=evil("truncating"),
                    messages_before=5,
                    messages_after=5,
                    tokens_before=200,
                    tokens_after=180,
                    revised=(answer.message_id,),
                    model_call_count=2,
                    detail=evil("detail"),
                    version=2,
                ),
            )
        )
        summary = SummaryEntry(
            summary_id=ids["summary"] + tag,
            session_id=session,
            agent_id=agent,
            seq=1,
            content=evil("summary"),
            summarizer=evil("summarizer"),
            reduction_id=ids["reduction"] + tag,
            replaces=(use.message_id, result.message_id),
            tokens=20,
        )
        store.commit(
            Changeset(
                session_id=session,
                agent_id=agent,
                expected_version=2,
                summary=summary,
                reduction=Reduction(
                    reduction_id=ids["reduction"] + tag,
                    session_id=session,
                    agent_id=agent,
                    trigger="reactive",
                    strategy=evil("strategy"),
                    created_at=datetime.now(UTC) + timedelta(seconds=1),
                    messages_before=5,
                    messages_after=4,
                    tokens_before=200,
                    tokens_after=120,
                    evicted=(use.message_id, result.message_id),
                    summary_id=summary.summary_id,
                    model_call_count=2,
                    error=evil("error"),
                    version=3,
                ),
                model_call_count=3,
            )
        )
    return ids
