"""The async API: :class:`AsyncLedger` and :class:`AsyncConversation`, from the one sync source.

One source, no second copy
--------------------------
The sync code (``Conversation``, the managers, the stores) is the only implementation.
Each coroutine of the async API runs one call of it -- the whole unit of work: plan,
summarize, commit, retry -- as one job on a worker thread of the ledger's
:class:`~contextledger.aio.runner.Runner`, on the sync drivers (``sqlite3``, psycopg,
redis-py), and the caller's task awaits it without blocking its loop:

* one hand-over per call, whatever the call does inside (a commit's statements run on
  that worker's connection, one after the other, as in the sync API) -- except an
  append on a SQLite or in-memory store, which runs on the caller's thread with no
  hand-over when it can commit without waiting (``inline``, see
  :class:`~contextledger.aio.AsyncConversation`), and on a worker otherwise;
* nothing is bound to an event loop: an ``AsyncLedger``, its conversations and the
  OpenAI ``LedgerSession`` serve tasks of any loop in any thread;
* a cancelled task leaves each commit applied once or not at all and holds no lock or
  connection once it has seen its ``CancelledError`` (see :mod:`contextledger.aio.runner`);
* a coroutine summarizer runs on the caller's loop while the worker waits for it
  (:mod:`contextledger.core.seam`).

Why threads and not the 0.2 greenlet bridge (SQLAlchemy's ``greenlet_spawn`` over
aiosqlite, psycopg async and redis.asyncio): measured side by side
(``benchmarks/aio.py``), the bridge made about 22 voluntary context switches per SQLite
append (aiosqlite hands every statement to its own thread) against about 2 here, and
cost 2.3-2.5x the sync path's CPU; it bound every connection to the loop that opened it
(another loop's call failed or hung), and a cancelled task could leave SQLite's write
lock held. It also leaned on ``sqlalchemy.util.concurrency``, which SQLAlchemy does not
present as public API; nothing here does.

Calls on one ``AsyncConversation`` run one at a time in the order they were made;
different conversations commit concurrently, up to the ledger's ``workers``.

Example::

    from contextledger import SlidingWindowConversationManager
    from contextledger.aio import AsyncLedger

    async def main() -> None:
        async with await AsyncLedger.connect("sqlite:///agents.db") as ledger:
            conversation = await ledger.conversation("s1", manager=SlidingWindowConversationManager(window_size=4))
            await conversation.append({"role": "user", "content": [{"text": "hi"}]})
            await conversation.before_model_call()
"""

from contextledger.aio.conversation import AsyncConversation
from contextledger.aio.ledger import AsyncLedger
from contextledger.aio.runner import Runner

__all__ = ["AsyncConversation", "AsyncLedger", "Runner"]
