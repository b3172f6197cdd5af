"""The async API: :class:`AsyncLedger` and :class:`AsyncConversation`, from the one sync source.

One source, no second copy
--------------------------
The sync code (``Conversation``, the managers, the stores) is the only implementation.
The async API runs it in a greenlet, the way SQLAlchemy's own ``AsyncSession`` wraps
``Session``: each coroutine is ``await greenlet_spawn(sync_method, ...)``, and inside the
greenlet every blocking point awaits a real async driver through ``await_only``:

* SQL: the :class:`~contextledger.stores.sql.SQLStore` runs on the ``sync_engine`` of an
  async engine (``sqlite+aiosqlite``; psycopg 3 in async mode), with the same listeners
  and options (WAL, busy and lock timeouts, ``BEGIN IMMEDIATE``) -- how SQLAlchemy's
  ``AsyncConnection.run_sync`` works.
* Redis: :class:`~contextledger.aio.redis.AsyncRedisClient` offers the sync redis-py
  surface the :class:`~contextledger.stores.redis.RedisStore` uses (commands, pipelines,
  registered scripts) over ``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``.
* The conversation's own waits (the conflict back-off, a coroutine summarizer) go through
  :mod:`contextledger.seam`.

Why this scheme: the planning, view rules, exactly-once commits and error translation
are the subtle part of the library, and here they exist once, tested once by both
APIs; the async shells are a line per method (:class:`~contextledger.aio.shell.coroutine_of`).
Generating a sync twin from async source (``unasyncd``) would have turned every store
and the conversation into async code and kept two trees to check for drift; a sans-IO
core would have meant rewriting the stores' transactions as state machines.

No thread pool is involved: one event loop thread runs every greenlet, and a call that
waits on the database lets the loop run other tasks. Calls on one ``AsyncConversation``
are serialized; different conversations commit concurrently.

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
from contextledger.aio.stores import open_async_store

__all__ = ["AsyncConversation", "AsyncLedger", "open_async_store"]
