"""The LangGraph adapter against the real ``langgraph`` package: a ``BaseStore`` over Soulpass accounts."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

import soulpass
from soulpass.integrations.langgraph import SoulpassStore, item_state_name

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path: Path) -> SoulpassStore:
    return SoulpassStore(soulpass.open(tmp_path, embedder="none"))


def fill(store: SoulpassStore) -> None:
    store.put(("ann", "memories"), "home", {"text": "Ann lives in Lisbon", "topic": "place", "stars": 5})
    store.put(("ann", "memories"), "pet", {"text": "Ann has a cat named Miso", "topic": "pets", "stars": 3})
    store.put(("ann", "projects"), "garden", {"text": "Ann plants tomatoes in Lisbon", "topic": "place", "stars": 1})
    store.put(("bob", "memories"), "home", {"text": "Bob lives in Porto", "topic": "place", "stars": 4})


def test_put_get_search_delete_across_namespaces(store: SoulpassStore) -> None:
    fill(store)
    assert sorted(store.sp.accounts()) == ["ann", "bob"]  # the first label names the account
    home = store.get(("ann", "memories"), "home")
    assert home is not None and home.value["text"] == "Ann lives in Lisbon"
    assert home.namespace == ("ann", "memories") and home.key == "home"
    assert store.get(("bob", "memories"), "home").value["text"] == "Bob lives in Porto"  # type: ignore[union-attr]
    assert store.get(("ann", "memories"), "missing") is None
    assert store.get(("carol", "memories"), "home") is None  # no such account: nothing made by a read

    lisbon = store.search(("ann",), query="Lisbon")
    assert {(i.namespace, i.key) for i in lisbon} == {(("ann", "memories"), "home"), (("ann", "projects"), "garden")}
    assert all(i.score is not None and 0 < i.score <= 1 for i in lisbon)
    assert [i.key for i in store.search(("ann", "memories"), query="Lisbon")] == ["home"]
    assert [i.namespace for i in store.search((), query="lives")] != []  # every account
    assert {i.namespace[0] for i in store.search((), query="lives")} == {"ann", "bob"}

    store.delete(("ann", "memories"), "home")
    assert store.get(("ann", "memories"), "home") is None
    assert [i.key for i in store.search(("ann",), query="Lisbon")] == ["garden"]
    assert store.get(("bob", "memories"), "home") is not None  # the other namespace untouched


def test_filters_and_listing_without_a_query(store: SoulpassStore) -> None:
    fill(store)
    assert {i.key for i in store.search(("ann",), filter={"topic": "place"})} == {"home", "garden"}
    assert [i.key for i in store.search(("ann",), filter={"stars": {"$gte": 3}, "topic": {"$ne": "pets"}})] == ["home"]
    assert [i.key for i in store.search(("ann",), query="Lisbon", filter={"stars": {"$lt": 2}})] == ["garden"]
    newest_first = [i.key for i in store.search(("ann",))]
    assert newest_first == ["garden", "pet", "home"]
    assert [i.key for i in store.search(("ann",), limit=1, offset=1)] == ["pet"]
    assert store.search(("ann",), filter={"stars": {"$gt": "x"}}) == []  # values that do not compare
    with pytest.raises(ValueError, match=r"\$like"):
        store.search(("ann",), filter={"text": {"$like": "L%"}})


def test_list_namespaces(store: SoulpassStore) -> None:
    fill(store)
    assert store.list_namespaces() == [("ann", "memories"), ("ann", "projects"), ("bob", "memories")]
    assert store.list_namespaces(prefix=("ann",)) == [("ann", "memories"), ("ann", "projects")]
    assert store.list_namespaces(suffix=("memories",)) == [("ann", "memories"), ("bob", "memories")]
    assert store.list_namespaces(prefix=("*", "projects")) == [("ann", "projects")]
    assert store.list_namespaces(max_depth=1) == [("ann",), ("bob",)]
    assert store.list_namespaces(limit=1, offset=2) == [("bob", "memories")]
    store.delete(("ann", "projects"), "garden")
    assert ("ann", "projects") not in store.list_namespaces()


def test_each_put_is_a_version_and_history_keeps_the_old_value(store: SoulpassStore) -> None:
    store.put(("ann", "memories"), "home", {"text": "Ann lives in Lisbon"})
    first = store.get(("ann", "memories"), "home")
    store.put(("ann", "memories"), "home", {"text": "Ann lives in Madrid"})
    store.delete(("ann", "memories"), "home")
    account = store.sp.account("ann")
    assert account.head() == 3
    name = item_state_name(("ann", "memories"), "home")
    assert account.state(name, at=1).data["value"] == {"text": "Ann lives in Lisbon"}  # type: ignore[union-attr]
    assert account.state(name, at=2).data["value"] == {"text": "Ann lives in Madrid"}  # type: ignore[union-attr]
    store.put(("ann", "memories"), "home", {"text": "Ann lives in Rome"})
    again = store.get(("ann", "memories"), "home")
    assert first is not None and again is not None and again.created_at > first.created_at  # made anew
    assert again.updated_at >= again.created_at


def test_a_batch_is_one_version_per_account_and_reads_its_own_puts(store: SoulpassStore) -> None:
    results = store.batch([
        PutOp(("ann", "m"), "a", {"text": "alpha"}),
        PutOp(("ann", "m"), "b", {"text": "beta"}),
        PutOp(("bob", "m"), "a", {"text": "gamma"}),
        GetOp(("ann", "m"), "a"),
        PutOp(("ann", "m"), "a", {"text": "alpha two"}),
        PutOp(("ann", "m"), "a", {"text": "alpha three"}),
        SearchOp(("ann",), query="alpha"),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("bob",)),)),
    ])
    assert results[:3] == [None, None, None]
    assert results[3].value == {"text": "alpha"}  # type: ignore[union-attr]
    assert [i.value for i in results[6]] == [{"text": "alpha three"}]  # type: ignore[union-attr]
    assert results[7] == [("bob", "m")]
    assert store.sp.account("ann").head() == 2 and store.sp.account("bob").head() == 1


def test_the_async_methods_run_the_same_batch(store: SoulpassStore) -> None:
    async def run() -> Any:
        await store.aput(("ann", "m"), "a", {"text": "async alpha"})
        got = await store.aget(("ann", "m"), "a")
        found = await store.asearch(("ann",), query="alpha")
        await store.adelete(("ann", "m"), "a")
        return got, found, await store.aget(("ann", "m"), "a"), await store.alist_namespaces()

    got, found, gone, namespaces = asyncio.run(run())
    assert got.value == {"text": "async alpha"} and [i.key for i in found] == ["a"]
    assert gone is None and namespaces == []


def test_a_new_store_reads_what_another_wrote(tmp_path: Path) -> None:
    fill(SoulpassStore(soulpass.open(tmp_path, embedder="none")))
    again = SoulpassStore(soulpass.open(tmp_path, embedder="none"))
    assert again.get(("ann", "memories"), "pet").value["text"] == "Ann has a cat named Miso"  # type: ignore[union-attr]


def test_ttl_is_refused(store: SoulpassStore) -> None:
    with pytest.raises(NotImplementedError):
        store.put(("ann", "m"), "a", {"text": "x"}, ttl=5)


def test_search_by_meaning_with_the_model(tmp_path: Path, minilm: Any) -> None:
    store = SoulpassStore(soulpass.open(tmp_path, embedder=minilm))
    fill(store)
    assert store.search(("ann",), query="which city is Ann's residence?", limit=1)[0].key == "home"
    assert store.search(("ann",), query="animal companion", limit=1)[0].key == "pet"


def test_a_graph_recalls_in_thread_two_what_thread_one_stored(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from langgraph_memory import ask, build
    finally:
        sys.path.remove(str(ROOT / "examples"))
    graph = build(str(tmp_path))
    assert ask(graph, "thread-1", "remember I live in Lisbon") == "I will remember that."
    assert ask(graph, "thread-2", "where do I live?") == "What I remember: I live in Lisbon"
    state = graph.get_state({"configurable": {"thread_id": "thread-2"}})
    assert len(state.values["messages"]) == 2  # thread two's conversation holds only its own turns


def test_it_answers_as_langgraphs_own_in_memory_store(store: SoulpassStore) -> None:
    """The same random operations on both stores: the same items, namespaces and filtered searches."""
    from langgraph.store.memory import InMemoryStore

    reference = InMemoryStore()
    rng = random.Random(39)
    namespaces = [("ann", "memories"), ("ann", "projects"), ("bob", "memories"), ("ann", "memories", "old")]
    for step in range(80):
        namespace, key = rng.choice(namespaces), rng.choice("abcde")
        if rng.random() < 0.7:
            value = {"text": f"note {step}", "stars": rng.randint(1, 5), "tag": rng.choice(["x", "y"])}
            both: tuple[Any, ...] = (store.put(namespace, key, value), reference.put(namespace, key, value))
        else:
            both = (store.delete(namespace, key), reference.delete(namespace, key))
        assert both[0] == both[1]

    def shape(items: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((i.namespace, i.key, json.dumps(i.value, sort_keys=True)) for i in items)

    for namespace in namespaces:
        for key in "abcde":
            ours, theirs = store.get(namespace, key), reference.get(namespace, key)
            assert (ours and ours.value) == (theirs and theirs.value)
    for prefix in [("ann",), ("ann", "memories"), ("bob",), ()]:
        for filter_ in [None, {"tag": "x"}, {"stars": {"$gte": 4}}, {"stars": {"$ne": 3}, "tag": "y"}]:
            assert shape(store.search(prefix, filter=filter_, limit=100)) == \
                shape(reference.search(prefix, filter=filter_, limit=100)), (prefix, filter_)
    for listing in [{}, {"max_depth": 2}, {"suffix": ("memories",)}, {"prefix": ("ann", "*")}]:
        assert sorted(store.list_namespaces(**listing)) == sorted(reference.list_namespaces(**listing)), listing
