"""The paging contract: a page of a listing is the slice of the whole listing it names, on every store."""

from __future__ import annotations

import itertools

from contextledger.core.changeset import Changeset
from contextledger.model.messages import Message
from contextledger.model.paging import Page
from contextledger.model.records import Reduction, ViewEntry
from contextledger.stores.base import LedgerStore

__all__ = ["PagingContract"]

_TOTAL = 12
_EVICTED = (1, 2, 5)
_CURSORS = (None, 0, 3, 7, 11, 12)
_COUNTS = (None, 0, 1, 4, 50)


def _fill(store: LedgerStore) -> None:
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


class PagingContract:
    """Pages of ``history``: every cursor and count against the slice of the whole listing."""

    def test_every_page_of_history_is_its_slice(self, store: LedgerStore) -> None:
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

    def test_pages_chained_by_cursor_cover_the_history_once(self, store: LedgerStore) -> None:
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

    def test_a_page_of_an_unknown_conversation_is_empty(self, store: LedgerStore) -> None:
        assert store.history("nope", "a", page=Page.of(after=3, limit=2)) == []
        assert store.history("nope", "a", page=Page.of(last=2)) == []
