"""LangGraph with its checkpointers, ``SqliteSaver`` and ``PostgresSaver``.

A one-node graph over ``MessagesState``: each turn is one ``graph.invoke`` with the
user's message, whose node returns the assistant's tool call, the tool's result and
the answer, checkpointed as LangGraph does (the whole ``messages`` channel per
checkpoint). A restore is ``graph.get_state`` of the thread (read from the checkpointer each time).
With ``params["durability"] == "equal"`` SQLite runs in WAL with ``synchronous=NORMAL``, as
every SQLite contender; with ``"default"`` the connection is left as ``sqlite3`` opens it
and the saver configures it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph

from _protocol import Contender, NotApplicable, start, stop, text_of, tool_result, tool_use, turn
from contenders._files import tree_bytes


def messages_of(session: str, n: int) -> tuple[HumanMessage, list[Any]]:
    """Turn ``n``: the user's message, and what the node answers."""
    user, call, result, answer = turn(session, n)
    use, res = tool_use(call), tool_result(result)
    assert use is not None and res is not None
    return HumanMessage(content=text_of(user)), [
        AIMessage(content="", tool_calls=[{"name": use["name"], "args": use["input"], "id": use["toolUseId"]}]),
        ToolMessage(content=res["content"][0]["text"], tool_call_id=res["toolUseId"]),
        AIMessage(content=text_of(answer)),
    ]


class LangGraphContender(Contender):
    """A compiled one-node graph with a SQLite or PostgreSQL checkpointer."""

    def __init__(self) -> None:
        self.pending: list[Any] = []
        self.workload = ""
        self.session = ""
        self.path: str | None = None
        self.url = ""
        self.equal = True
        self.conns: list[Any] = []
        self.graph: Any = None

    def node(self, state: MessagesState) -> dict[str, Any]:
        return {"messages": self.pending}

    def compile(self) -> Any:
        if self.path is not None:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn: Any = sqlite3.connect(self.path, check_same_thread=False)
            if self.equal:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
            saver: Any = SqliteSaver(conn)
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row

            conn = psycopg.connect(
                self.url.replace("postgresql+psycopg://", "postgresql://"),
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
            )
            saver = PostgresSaver(conn)
        saver.setup()
        self.conns.append(conn)
        builder = StateGraph(MessagesState)
        builder.add_node("answer", self.node)
        builder.add_edge(START, "answer")
        return builder.compile(checkpointer=saver)

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.session}}

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in ("append", "restore_wide", "storage"):
            raise NotApplicable(f"no {workload} workload")
        self.workload = workload
        self.session = str(params["session"])
        self.path = str(params["path"]) if "path" in params else None
        self.equal = params.get("durability", "equal") == "equal"
        self.url = str(params.get("url", ""))
        self.graph = self.compile()
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.invoke(n)
        return {}

    def invoke(self, n: int) -> float:
        user, self.pending = messages_of(self.session, n)
        t0 = start()
        self.graph.invoke({"messages": [user]}, self.config)
        return stop(t0)

    def step(self, n: int) -> float:
        if self.workload == "append":
            return self.invoke(n)
        if self.workload == "restore_wide":
            t0 = start()
            messages = self.graph.get_state(self.config).values["messages"]
            elapsed = stop(t0)
            assert messages
            return elapsed
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        if self.workload != "storage" or self.path is None:
            raise NotApplicable("bytes are counted on SQLite files")
        self.close()
        return tree_bytes(self.path)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.conns = []
