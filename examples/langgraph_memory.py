"""A LangGraph graph that remembers across threads, with Soulpass as its store.

    python examples/langgraph_memory.py /tmp/langgraph-home

Each thread has its own conversation (LangGraph's checkpointer); what a user asks to be remembered
goes to the store under ``(user_id, "memories")`` (account ``user_id`` in Soulpass, one version per
put), and every turn recalls the memories the store's hybrid search finds for the message. The node
answers from what it recalled, so the example needs no model or network; in a real graph the
recalled memories go into the prompt of a chat model.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

import soulpass
from soulpass.integrations.langgraph import SoulpassStore


@dataclass
class User:
    user_id: str


def chat(state: MessagesState, runtime: Runtime[User]) -> dict[str, list[AIMessage]]:
    assert runtime.store is not None
    namespace = (runtime.context.user_id, "memories")
    said = str(state["messages"][-1].content)
    if said.lower().startswith("remember "):
        runtime.store.put(namespace, str(uuid.uuid4()), {"text": said[len("remember "):]})
        return {"messages": [AIMessage("I will remember that.")]}
    memories = runtime.store.search(namespace, query=said, limit=3)
    recalled = "; ".join(m.value["text"] for m in memories) or "nothing yet"
    return {"messages": [AIMessage(f"What I remember: {recalled}")]}


def build(home: str) -> CompiledStateGraph[MessagesState, User, MessagesState, MessagesState]:
    store = SoulpassStore(soulpass.open(home, embedder="none"))
    graph = StateGraph(MessagesState, context_schema=User)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(checkpointer=InMemorySaver(), store=store)


def ask(graph: CompiledStateGraph[MessagesState, User, MessagesState, MessagesState], thread: str,
        text: str) -> str:
    out = graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}},
                       context=User(user_id="ann"))
    return str(out["messages"][-1].content)


if __name__ == "__main__":
    graph = build(sys.argv[1])
    print(ask(graph, "thread-1", "remember I live in Lisbon"))
    print(ask(graph, "thread-2", "where do I live?"))
