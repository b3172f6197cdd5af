"""Who runs: every contender, where its worker runs and what it is pointed at."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What a contender cannot do, and why (the report's "n/a" cells for peers).
_NO_LEDGER = "keeps no ledger: no window over a longer history, no record of reductions"
_NO_HOOKS = "has no model-call hooks"
_NOT_HERE = "not in this workload (see the other rows)"
_SQLITE_BYTES = "bytes are counted on SQLite files"
_ONE_WRITER = "measured on PostgreSQL and Redis (SQLite has one writer at a time)"
_BMC_WHERE = "measured on memory and SQLite"
DEFERRED = "+deferred"
"""The key suffix of a before_model_call lane whose count waits for the next commit."""
_SYNC_ONLY = "measured on the sync API (one source: the async API runs the same code)"
_ADK_API = "ADK's session API appends and restores whole sessions; measured on the ledger's own API"
_AT_DEFAULT = "measured on append at this setting (the other workloads: see the rows at the run's durability)"
# Reasons that say where a workload is measured rather than what a contender cannot do:
# the workload's table leaves such rows out.
SCOPE = frozenset(
    {
        _NOT_HERE,
        _SQLITE_BYTES,
        _ONE_WRITER,
        _BMC_WHERE,
        _SYNC_ONLY,
        _ADK_API,
        _AT_DEFAULT,
        "measured on PostgreSQL and Redis only",
    }
)


@dataclass(frozen=True)
class Spec:
    """One contender.

    Attributes:
        key: Short id (``cl-sqlite``).
        label: How the tables name it.
        group: ``contextledger``, ``raw`` or ``peer``.
        worker: Its name in ``worker.CONTENDERS``.
        env: Peer environment under ``.data/venvs`` (``None``: the project's Python).
        engine: ``sqlite``, ``postgres``, ``redis``, ``files`` or ``memory``.
        does: Workloads it runs; any other gets ``reasons.get(w)`` as its n/a.
        reasons: Why it does not do a workload.
        durability: Its durability settings, stated next to its figures. ``set here:``
            names what the harness changed from the library's own default.
        variant: ``equal`` (the run's durability for its engine, as every contender on
            it) or ``default`` (the library as it configures itself); the worker gets it
            as ``params["durability"]``.
        server: The server it is pointed at (``postgres@default``: a database with
            PostgreSQL's default ``synchronous_commit=on``); ``None``: its engine's.
    """

    key: str
    label: str
    group: str
    worker: str
    env: str | None
    engine: str
    does: frozenset[str]
    reasons: dict[str, str] = field(default_factory=dict)
    durability: str = ""
    variant: str = "equal"
    server: str | None = None

    def reason(self, workload: str) -> str:
        return self.reasons.get(workload, _NOT_HERE)

    def params(self, workload: str, directory: Path, servers: dict[str, str | None]) -> dict[str, Any] | str:
        """The worker's setup parameters, or why it cannot run (a server is missing)."""
        directory.mkdir(parents=True, exist_ok=True)
        params: dict[str, Any] = {
            "directory": str(directory / "files"),
            "key_prefix": "bench",
            "durability": self.variant,
        }
        if self.engine in ("postgres", "redis"):
            url = servers.get(self.server or self.engine)
            if url is None:
                return f"no {'PostgreSQL' if self.engine == 'postgres' else 'Redis'} server"
            params["url"] = url
        elif self.engine == "memory":
            params["url"] = "memory://"
        elif self.engine == "sqlite":
            path = directory / f"{self.key}.db"
            params["path"] = str(path)
            params["url"] = f"sqlite:///{path}"
        return params


_CL_ALL = frozenset(
    {"append", "restore_window", "restore_wide", "reduction", "storage", "before_model_call", "concurrency"}
)
_RAW_ALL = frozenset({"append", "restore_window", "restore_wide", "storage", "concurrency"})
_RAW_WHY = {
    "reduction": "no reductions: the raw schema keeps only messages",
    "before_model_call": _NO_HOOKS,
}
_PEER_WHY = {"restore_window": _NO_LEDGER, "reduction": _NO_LEDGER, "before_model_call": _NO_HOOKS}
_HOST_DOES = frozenset({"append", "restore_wide", "storage"})
_HOST_WHY = {
    "restore_window": "measured on the core API (the interface adds the same per-message work)",
    "reduction": "measured on the core API",
    "before_model_call": "measured on the core API",
    "concurrency": "measured on PostgreSQL and Redis only",
}


def _peer(
    key: str,
    label: str,
    worker: str,
    env: str,
    engine: str,
    durability: str,
    *,
    why: dict[str, str] | None = None,
    default: str | None = None,
) -> tuple[Spec, ...]:
    """A peer at the run's durability, and -- when ``default`` names settings that differ
    -- a second row at the library's own default (append only)."""
    does = frozenset({"append", "restore_wide", "storage"})
    reasons = {**_PEER_WHY, "concurrency": "measured on PostgreSQL and Redis only", **(why or {})}
    if engine != "sqlite" and engine != "files":
        reasons["storage"] = _SQLITE_BYTES
        does -= {"storage"}
    equal = Spec(key, label, "peer", worker, env, engine, does, reasons, durability)
    if default is None:
        return (equal,)
    at_default = {w: _AT_DEFAULT for w in (*reasons, *does) if w != "append"}
    server = "postgres@default" if engine == "postgres" else None
    return (
        equal,
        Spec(
            f"{key}-default",
            f"{label}, its default",
            "peer",
            worker,
            env,
            engine,
            frozenset({"append"}),
            at_default,
            default,
            "default",
            server,
        ),
    )


_ALL_WORKLOADS = (
    "append",
    "restore_window",
    "restore_wide",
    "reduction",
    "storage",
    "before_model_call",
    "concurrency",
)
# The run's durability per engine, as each row states it (the servers' own lines add
# what the servers report).
_SQLITE_EQUAL = "WAL, synchronous=NORMAL"
_PG_EQUAL = "server: synchronous_commit=off, fsync=on"
_PG_DEFAULT = "server: synchronous_commit=on (PostgreSQL's default), fsync=on"
_REDIS = "server: appendonly=yes, appendfsync=everysec"


CONTENDERS: tuple[Spec, ...] = (
    Spec(
        "cl-sqlite",
        "contextledger (SQLite)",
        "contextledger",
        "cl",
        None,
        "sqlite",
        _CL_ALL - {"concurrency"},
        {"concurrency": _ONE_WRITER},
        f"{_SQLITE_EQUAL} (its default)",
    ),
    Spec(
        "cl-postgres",
        "contextledger (PostgreSQL)",
        "contextledger",
        "cl",
        None,
        "postgres",
        _CL_ALL - {"storage", "before_model_call"},
        {"storage": _SQLITE_BYTES, "before_model_call": _BMC_WHERE},
        f"{_PG_EQUAL} (it sets none)",
    ),
    Spec(
        "cl-postgres-default",
        "contextledger (PostgreSQL), PostgreSQL's default",
        "contextledger",
        "cl",
        None,
        "postgres",
        frozenset({"append"}),
        {w: _AT_DEFAULT for w in _ALL_WORKLOADS if w != "append"},
        f"{_PG_DEFAULT} (it sets none)",
        "default",
        "postgres@default",
    ),
    Spec(
        "cl-redis",
        "contextledger (Redis)",
        "contextledger",
        "cl",
        None,
        "redis",
        _CL_ALL - {"storage", "before_model_call"},
        {"storage": _SQLITE_BYTES, "before_model_call": _BMC_WHERE},
        f"{_REDIS} (it sets none)",
    ),
    Spec(
        "cl-memory",
        "contextledger (memory)",
        "contextledger",
        "cl",
        None,
        "memory",
        frozenset({"before_model_call"}),
        durability="none: in memory",
    ),
    *(
        Spec(
            f"cl-async-{engine}",
            f"contextledger async API ({label})",
            "contextledger",
            "cl-async",
            None,
            engine,
            frozenset({"append", "restore_window", "restore_wide"}),
            {
                "reduction": _SYNC_ONLY,
                "storage": _SYNC_ONLY,
                "before_model_call": _SYNC_ONLY,
                "concurrency": _SYNC_ONLY,
            },
            durability,
        )
        for engine, label, durability in (
            ("sqlite", "SQLite", f"{_SQLITE_EQUAL} (its default)"),
            ("postgres", "PostgreSQL", f"{_PG_EQUAL} (it sets none)"),
            ("redis", "Redis", f"{_REDIS} (it sets none)"),
        )
    ),
    Spec(
        "raw-sqlite",
        "sqlite3 (raw driver)",
        "raw",
        "raw-sqlite",
        None,
        "sqlite",
        _RAW_ALL - {"concurrency"},
        {**_RAW_WHY, "concurrency": _ONE_WRITER},
        f"set here: {_SQLITE_EQUAL} (sqlite3's default: rollback journal, synchronous=FULL)",
    ),
    Spec(
        "raw-postgres",
        "psycopg (raw driver)",
        "raw",
        "raw-postgres",
        None,
        "postgres",
        _RAW_ALL - {"storage"},
        {**_RAW_WHY, "storage": _SQLITE_BYTES},
        _PG_EQUAL,
    ),
    Spec(
        "raw-postgres-default",
        "psycopg (raw driver), PostgreSQL's default",
        "raw",
        "raw-postgres",
        None,
        "postgres",
        frozenset({"append"}),
        {w: _AT_DEFAULT for w in _ALL_WORKLOADS if w != "append"},
        _PG_DEFAULT,
        "default",
        "postgres@default",
    ),
    Spec(
        "raw-redis",
        "redis-py pipeline (raw driver)",
        "raw",
        "raw-redis",
        None,
        "redis",
        _RAW_ALL - {"storage"},
        {**_RAW_WHY, "storage": _SQLITE_BYTES},
        _REDIS,
    ),
    *_peer(
        "strands-file",
        "Strands FileSessionManager",
        "strands-file",
        "strands",
        "files",
        "a JSON file per message, written to a temporary file and renamed, no fsync (its only mode)",
    ),
    *_peer(
        "oai-sqlite",
        "OpenAI Agents SQLiteSession",
        "oai-sqlite",
        "openai_agents",
        "sqlite",
        "WAL (its own), set here: synchronous=NORMAL",
        default="WAL (its own), synchronous=FULL (SQLite's default; it sets none)",
    ),
    *_peer(
        "oai-sqlalchemy",
        "OpenAI Agents SQLAlchemySession (SQLite)",
        "oai-sqlalchemy",
        "openai_agents",
        "sqlite",
        "WAL (its own), set here: synchronous=NORMAL",
        default="WAL (its own), synchronous=FULL (SQLite's default; it sets none)",
    ),
    *_peer(
        "oai-sqlalchemy-postgres",
        "OpenAI Agents SQLAlchemySession (PostgreSQL)",
        "oai-sqlalchemy",
        "openai_agents",
        "postgres",
        f"{_PG_EQUAL} (it sets none)",
        default=f"{_PG_DEFAULT} (it sets none)",
    ),
    *_peer(
        "oai-redis",
        "OpenAI Agents RedisSession",
        "oai-redis",
        "openai_agents",
        "redis",
        f"{_REDIS} (it sets none; Redis has no per-client durability setting)",
    ),
    *_peer(
        "adk",
        "Google ADK DatabaseSessionService (SQLite)",
        "adk",
        "adk",
        "sqlite",
        f"set here: {_SQLITE_EQUAL}",
        default="its own engine: rollback journal, synchronous=FULL (SQLite's defaults; it sets none)",
    ),
    *_peer("adk-memory", "Google ADK InMemorySessionService", "adk-memory", "adk", "memory", "none: in memory"),
    *(
        Spec(
            f"cl-adk-{engine}",
            f"contextledger LedgerSessionService for ADK ({label})",
            "contextledger",
            "cl-adk",
            None,
            engine,
            frozenset({"append", "restore_wide", "storage"} if engine == "sqlite" else {"append", "restore_wide"}),
            {
                "restore_window": _ADK_API,
                "reduction": _ADK_API,
                "before_model_call": _ADK_API,
                "concurrency": _ADK_API,
                "storage": _SQLITE_BYTES,
            },
            durability,
        )
        for engine, label, durability in (
            ("sqlite", "SQLite", f"{_SQLITE_EQUAL} (its default)"),
            ("postgres", "PostgreSQL", f"{_PG_EQUAL} (it sets none)"),
            ("redis", "Redis", f"{_REDIS} (it sets none)"),
        )
    ),
    *_peer(
        "langgraph-sqlite",
        "LangGraph SqliteSaver",
        "langgraph",
        "langgraph",
        "sqlite",
        f"set here: {_SQLITE_EQUAL}",
        default="WAL (its own, in setup()), synchronous=FULL (SQLite's default)",
    ),
    *_peer(
        "langgraph-postgres",
        "LangGraph PostgresSaver",
        "langgraph",
        "langgraph",
        "postgres",
        f"{_PG_EQUAL} (it sets none)",
        default=f"{_PG_DEFAULT} (it sets none)",
    ),
    *_peer(
        "langchain",
        "LangChain SQLChatMessageHistory (SQLite)",
        "langchain",
        "langchain",
        "sqlite",
        f"set here: {_SQLITE_EQUAL}",
        default="a plain engine: rollback journal, synchronous=FULL (SQLite's defaults; it sets none)",
    ),
    *_peer(
        "pydantic-ai-json",
        "Pydantic AI JSON rows per run (SQLite)",
        "pydantic-ai-json",
        "pydantic_ai",
        "sqlite",
        f"{_SQLITE_EQUAL} (rows written here with sqlite3: Pydantic AI has no store of its own)",
    ),
    # contextledger behind each host's own storage interface, next to that host's store above.
    *(
        Spec(key, label, "contextledger", key, None, "sqlite", _HOST_DOES, _HOST_WHY, f"{_SQLITE_EQUAL} (its default)")
        for key, label in (
            ("cl-openai-agents", "contextledger LedgerSession, OpenAI Agents (SQLite)"),
            ("cl-langchain", "contextledger LedgerChatMessageHistory (SQLite)"),
            ("cl-pydantic-ai", "contextledger LedgerHistory, Pydantic AI (SQLite)"),
        )
    ),
)

HAND_WRITTEN = frozenset({"pydantic-ai-json"})
"""Peers whose rows the harness writes with the bare driver (the host has no store of its
own): a floor like the raw drivers', shown next to contextledger without a target."""

HOST_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("cl-openai-agents", "oai-sqlite", "each read through one open session, as each run of the SDK's Runner reads"),
    (
        "cl-langchain",
        "langchain",
        "each read through a history object of its own, as RunnableWithMessageHistory makes;"
        " the ledger's shared views on (the view and the renderer kept), its default",
    ),
    (
        "cl-pydantic-ai",
        "pydantic-ai-json",
        "each read through a history object of its own, as each request of a server makes;"
        " the ledger's shared views on, its default",
    ),
)
"""(contextledger behind a host's interface, that host's own store, how both read back): compared in the targets.

How a read is made matters to the ledger (an open conversation re-reads its view only
when the stored version moved; a new object on the same ledger takes the view the
ledger's conversations last held when it did not move -- its shared views -- and a new
process restores it), not to the peers (each reads its table every time), so the target
row says it.
"""

GROUPS = ("contextledger", "raw", "peer")


def select(names: str) -> list[Spec]:
    """``--contenders cl,raw`` / ``contextledger,raw,peer`` / keys; ``all`` for everyone."""
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    if "all" in wanted:
        return list(CONTENDERS)
    aliases = {"cl": "contextledger", "peers": "peer"}
    wanted = {aliases.get(n, n) for n in wanted}
    known = {s.key for s in CONTENDERS} | set(GROUPS)
    unknown = wanted - known
    if unknown:
        raise ValueError(f"unknown contenders {sorted(unknown)}; choose from {', '.join(sorted(known))}")
    return [s for s in CONTENDERS if s.key in wanted or s.group in wanted]
