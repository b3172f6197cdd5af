"""The SQLite reader (stdlib driver) and the engine (SQLAlchemy) restore equal snapshots.

Random conversations -- evictions, summaries (superseding ones included), revisions of
truncated tool results, pins, repaired crashes, content of every shape -- are written
through the engine; after every step the reader's restore and the engine's restore of
the same rows must be equal, and equal to the live view.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Message
from contextledger.records import Snapshot
from contextledger.stores.sql import SQLStore, queries
from tests.test_properties import Run, manager_specs, scripts_of

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)  # no lone surrogates
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
# Content a restore must decode exactly: any text, bytes, unknown block kinds, metadata.
unusual = st.one_of(
    texts.map(lambda t: Message.user(t or "x")),
    st.builds(
        lambda data, meta: Message(
            role="user",
            content=[{"text": "see"}, {"image": {"format": "png", "source": {"bytes": data}}}],
            metadata=meta,
        ),
        st.binary(max_size=16),
        st.dictionaries(texts, json_values, max_size=3),
    ),
    st.builds(lambda value: Message(role="assistant", content=[{"custom": value}]), json_values),
)


def _engine_load(store: SQLStore, session_id: str) -> Snapshot | None:
    with store.engine.connect() as conn, conn.begin():
        return queries.load(conn, session_id, "default")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=manager_specs, script=scripts_of(1, 4), extra=st.lists(unusual, max_size=4))
def test_the_reader_and_the_engine_restore_equal_snapshots(
    sqlite_store: SQLStore, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]], extra: list[Message]
) -> None:
    reader = sqlite_store.reader
    assert reader is not None
    run = Run(sqlite_store, spec)
    assert reader.load(run.session_id, "default") is None
    assert _engine_load(sqlite_store, run.session_id) is None
    if extra:
        run.append(*extra)
    for step in script:
        run.run(step)
        raw = reader.load(run.session_id, "default")
        engine = _engine_load(sqlite_store, run.session_id)
        assert raw is not None
        assert raw == engine
        assert list(raw.entries) == list(run.conv.view.entries)
        assert raw.state.version == run.conv.version
        assert raw.state.model_call_count == run.conv.model_call_count
        # Every record the reader built is one validation would accept unchanged.
        assert Snapshot.model_validate(raw) == raw
