"""The Redis ledger store (plain Redis 7 or Redis Cluster; needs ``contextledger[redis]``).

``Ledger.connect("redis://127.0.0.1:6379/0")`` or ``Ledger.connect("redis+cluster://host:port")``
opens it; ``key_prefix`` (default ``"contextledger"``) namespaces every key.
"""

from contextledger.stores.redis.store import RedisStore

__all__ = ["RedisStore"]
