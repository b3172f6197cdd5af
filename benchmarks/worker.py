"""A contender's worker process: ``python benchmarks/worker.py NAME`` (see ``_protocol``).

Run by the harness with the Python of the contender's own environment: the project's
``.venv`` for contextledger and the raw drivers, ``benchmarks/.data/venvs/<peer>`` for
each peer. It imports only what its contender needs.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _protocol import Contender, NotApplicable, serve

# name -> "module:class"
CONTENDERS = {
    "cl": "contenders.cl:ContextLedger",
    "cl-async": "contenders.cl_async:AsyncContextLedger",
    "raw-sqlite": "contenders.raw:RawSQLite",
    "raw-postgres": "contenders.raw:RawPostgres",
    "raw-redis": "contenders.raw:RawRedis",
    "strands-file": "contenders.strands_file:StrandsFile",
    "oai-sqlite": "contenders.openai_agents:SQLiteSessionContender",
    "oai-sqlalchemy": "contenders.openai_agents:SQLAlchemySessionContender",
    "oai-redis": "contenders.openai_agents:RedisSessionContender",
    "adk": "contenders.adk:DatabaseSessionContender",
    "adk-memory": "contenders.adk:InMemorySessionContender",
    "cl-adk": "contenders.cl_adk:LedgerSessionContender",
    "langgraph": "contenders.langgraph_saver:LangGraphContender",
    "langchain": "contenders.langchain_history:SQLChatHistoryContender",
    "cl-langchain": "contenders.cl_langchain:LedgerChatHistoryContender",
    "pydantic-ai-json": "contenders.pydantic_ai_json:PydanticAIJsonRows",
    "cl-pydantic-ai": "contenders.cl_pydantic_ai:LedgerHistoryContender",
    "cl-openai-agents": "contenders.cl_openai_agents:LedgerSessionContender",
}


class Missing(Contender):
    """A contender whose library cannot be imported here: n/a for every workload."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def setup(self, workload: str, params: dict[str, object]) -> dict[str, object]:
        raise NotApplicable(self.reason)


def main() -> None:
    module_name, _, cls_name = CONTENDERS[sys.argv[1]].partition(":")
    try:
        contender: Contender = getattr(importlib.import_module(module_name), cls_name)()
    except ImportError as exc:
        contender = Missing(f"cannot import its library: {exc}")
    # Keep stdout for the protocol: whatever a library prints goes to stderr.
    protocol_out = sys.stdout
    sys.stdout = sys.stderr
    serve(contender, sys.stdin, protocol_out)


if __name__ == "__main__":
    main()
