"""The paging contract: a page of a listing is the slice of the whole listing it names, on every store."""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.model.messages import Message
from contextledger.model.paging import Page, cursor
from contextledger.model.records import Reduction, ViewEntry
from contextledger.stores.capabilities import HISTORY, Capability, CompleteStore
from contextledger.testing.declared import CapabilityContract

__all__ = ["KeyedPagingContract", "PagingContract"]

_TOTAL = 12
_EVICTED = (1, 2, 5)
_CURSORS = (None, 0, 3, 7, 11, 12)
_COUNTS = (None, 0, 1, 4, 50)


def _fill(store: CompleteStore) -> None:
    """A conversation of 12 entries at seqs 0, 2, 4... (gaps, as undo and erasure leave), three evicted."""
    messages = [Message.user(f"m{i}", message_id=f"m{i}") for i in range(_TOTAL)]
    appends = tuple(ViewEntry(entry_id=m.message_id, seq=2 * i, message=m, tokens=5) for i, m in enumerate(messages))
    store.commit(Changeset(session_id="s", agent_id="a", expected_version=0, appends=appends, next_seq=2 * _TOTAL))
    evicted = tuple(f"m{i}" for i in _EVICTED)
    reduction = Reduction(
        session_id="s",
        agent_id="a",
        trigger="manual",
        strategy="test",
        messages_before=_TOTAL,
        messages_after=_TOTAL - len(evicted),
        tokens_before=5 * _TOTAL,
        tokens_after=5 * (_TOTAL - len(evicted)),
        evicted=evicted,
    )
    store.commit(Changeset(session_id="s", agent_id="a", expected_version=1, evict=evicted, reduction=reduction))


def _expected(whole: list[int], page: Page) -> list[int]:
    ranged = [seq for seq in whole if page.admits(seq)]
    return page.cut(ranged)


class PagingContract(CapabilityContract):
    """Pages of ``history``: every cursor and count against the slice of the whole listing."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (HISTORY,)

    def test_every_page_of_history_is_its_slice(self, store: CompleteStore) -> None:
        _fill(store)
        for include_evicted in (True, False):
            whole = store.history("s", "a", include_evicted=include_evicted)
            seqs = [h.seq for h in whole]
            assert seqs == sorted(seqs)
            assert len(seqs) == (_TOTAL if include_evicted else _TOTAL - len(_EVICTED))
            by_seq = {h.seq: h for h in whole}
            for after, before in itertools.product(_CURSORS, _CURSORS):
                for limit, last in [(n, None) for n in _COUNTS] + [(None, n) for n in _COUNTS if n is not None]:
                    page = Page.of(after=after, before=before, limit=limit, last=last)
                    found = store.history("s", "a", include_evicted=include_evicted, page=page)
                    expected = _expected(seqs, page)
                    assert [h.seq for h in found] == expected, (include_evicted, page)
                    assert found == [by_seq[seq] for seq in expected], page

    def test_pages_chained_by_cursor_cover_the_history_once(self, store: CompleteStore) -> None:
        _fill(store)
        whole = store.history("s", "a")
        read: list[int] = []
        after = None
        while True:
            found = store.history("s", "a", page=Page.of(after=after, limit=5))
            read += [h.seq for h in found]
            if len(found) < 5:
                break
            after = found[-1].seq
        assert read == [h.seq for h in whole]
        # Backwards, from the newest: `before` the first of each page, the last 5.
        back: list[int] = []
        before = None
        while found := store.history("s", "a", page=Page.of(before=before, last=5)):
            back = [h.seq for h in found] + back
            before = found[0].seq
        assert back == [h.seq for h in whole]

    def test_a_page_of_an_unknown_conversation_is_empty(self, store: CompleteStore) -> None:
        assert store.history("nope", "a", page=Page.of(after=3, limit=2)) == []
        assert store.history("nope", "a", page=Page.of(last=2)) == []


def _reduce(store: CompleteStore) -> None:
    """Two agents, each with summaries superseding one another, plain evictions and pin changes.

    Every listing has rows; some pin changes share one changeset (and so its stamps).
    """
    for agent in ("a", "b"):
        chat = Conversation(store, "r", agent)
        chat.append(*(Message.user(f"{agent}{i}") for i in range(14)))
        for _ in range(3):
            chat.apply_plan(_summarize, trigger="proactive")
            chat.apply_plan(_evict_second, trigger="manual")
        ids = [e.entry_id for e in chat.view if e.kind == "message"]
        chat.pin(ids[-1])
        for pinned in (True, False):  # three pin changes in one changeset, twice
            pins = dict.fromkeys(ids[-4:-1], pinned)
            store.commit(Changeset(session_id="r", agent_id=agent, expected_version=chat.version, pins=pins))
            chat.refresh()


def _summarize(view: View) -> ReductionPlan:
    return ReductionPlan(
        strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=tuple(view.ids[:3]))
    )


def _evict_second(view: View) -> ReductionPlan:
    return ReductionPlan(strategy="sliding_window", evict=(view.ids[1],))


_LISTINGS = ("reductions", "summaries", "evictions", "pin_history")


def _listing(store: CompleteStore, name: str, agent: str | None, page: Page | None = None) -> list[Any]:
    found: list[Any] = getattr(store, name)("r", agent, page=page) if page else getattr(store, name)("r", agent)
    return found


class KeyedPagingContract(CapabilityContract):
    """Pages of reductions, summaries, evictions and pin events: cursors are :func:`cursor` of a record."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (HISTORY,)

    def test_every_page_of_a_keyed_listing_is_its_slice(self, store: CompleteStore) -> None:
        _reduce(store)
        for name, agent in itertools.product(_LISTINGS, (None, "b")):
            whole = _listing(store, name, agent)
            keys = [cursor(record) for record in whole]
            assert keys == sorted(keys), name  # ordered by the cursor, which is unique
            assert len(set(keys)) == len(keys) >= 3, name
            points = [None, keys[0], keys[len(keys) // 2], keys[-1]]
            for after, before in itertools.product(points, points):
                for limit, last in ((None, None), (2, None), (None, 2), (None, 0), (100, None)):
                    page = Page(after=after, before=before, limit=limit, last=last)
                    expected = page.cut([r for r in whole if page.admits(cursor(r))])
                    assert _listing(store, name, agent, page) == expected, (name, agent, page)

    def test_keyed_pages_chained_by_cursor_cover_the_listing_once(self, store: CompleteStore) -> None:
        _reduce(store)
        for name in _LISTINGS:
            whole = _listing(store, name, None)
            read: list[Any] = []
            page = Page(limit=4)
            while found := _listing(store, name, None, page):
                read += found
                page = Page(after=cursor(found[-1]), limit=4)
            assert read == whole, name
