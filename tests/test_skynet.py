"""The SKYNET-SAFE ``MemoryManager`` (seed 002) end to end: real store, real MiniLM, real ChromaDB."""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass import ConfigError, Conflict, InvalidInput, MemoryManager
from soulpass.ids import check_name

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")

HAS_CHROMA = importlib.util.find_spec("chromadb") is not None
BACKENDS = [
    pytest.param("chroma", marks=pytest.mark.skipif(not HAS_CHROMA, reason="chromadb is not installed")),
    pytest.param("default"),
]

# The seed's "Example Usage" block, verbatim (run with the test's tmp_path as working directory).
EXAMPLE = '''
# Initialize memory manager
memory_config = {
    "vector_db_type": "chroma",
    "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
    "memory_path": "./data/memory"
}
memory = MemoryManager(memory_config)

# Store a user message
user_message = {
    "sender": "user123",
    "content": "How does artificial intelligence work?",
    "timestamp": time.time()
}
memory.store_interaction(user_message)

# Store system response
system_response = "Artificial intelligence works by using algorithms and statistical models to perform tasks without explicit instructions, relying instead on patterns and inference."
memory.store_response(system_response, user_message)

# Retrieve interactions for reflection
recent_interactions = memory.retrieve_last_interactions(10)
for interaction in recent_interactions:
    print(f"User: {interaction['content']}")
    print(f"System: {interaction['response']}")
    print("---")

# Generate and store a reflection
reflection = "I notice that my explanations about AI tend to be technical. I should consider adding more examples and analogies."
memory.store_reflection(reflection)

# Save state to disk
memory.save_state()
'''  # noqa: E501


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemoryManager]:
    with MemoryManager({"memory_path": tmp_path / "memory"}) as manager:  # embedder "auto": the real MiniLM
        yield manager


@pytest.mark.parametrize("db_type", BACKENDS)
def test_seed_example_runs_as_written_and_survives_a_restart(
    db_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = EXAMPLE.replace('"vector_db_type": "chroma"', f'"vector_db_type": "{db_type}"')
    assert ('"vector_db_type": "chroma"' in code) == (db_type == "chroma")
    ns: dict[str, Any] = {"MemoryManager": MemoryManager, "time": time}
    exec(code, ns)

    assert capsys.readouterr().out == (
        f"User: {ns['user_message']['content']}\nSystem: {ns['system_response']}\n---\n")
    first: MemoryManager = ns["memory"]
    assert first.account.head() == 3  # message, response, reflection: one version each
    status = first.account.index().status()
    assert status.catalog_version == 3 and status.pending_embeddings == 0  # save_state caught up
    vectors = tmp_path / "data" / "memory" / "accounts" / "skynet" / "index" / "vectors"
    backend = "chroma" if db_type == "chroma" else "hnsw"
    assert [p.name.split("-")[0] for p in vectors.iterdir() if p.is_dir()] == [backend]
    first.close()

    again = MemoryManager(ns["memory_config"])  # the same folder, in the same process
    try:
        [pair] = again.retrieve_last_interactions(10)
        assert pair["content"] == ns["user_message"]["content"]
        assert pair["response"] == ns["system_response"]
        assert pair["metadata"]["source"] == "user123" and pair["metadata"]["type"] == "user_message"
        assert pair["metadata"]["timestamp"] == pytest.approx(ns["user_message"]["timestamp"], abs=1e-6)

        context = again.retrieve_relevant_context("How does AI work?")
        by_type = {d["metadata"]["type"]: d for d in context}
        assert set(by_type) == {"user_message", "system_response", "system_reflection"}
        assert by_type["user_message"]["id"] == pair["id"] and not by_type["user_message"]["is_reflection"]
        assert by_type["system_reflection"]["is_reflection"]
        assert by_type["system_reflection"]["content"] == ns["reflection"]
        assert by_type["system_reflection"]["metadata"]["source"] == "system"
        assert [d["is_reflection"] for d in context] == [False, False, True]  # interactions, then reflections
        response = again.account.record(by_type["system_response"]["id"])
        assert getattr(response, "reply_to", None) == pair["id"]  # linked by id, not by copied text
    finally:
        again.close()


def test_last_interactions_newest_first_with_their_responses(memory: MemoryManager) -> None:
    messages = [  # stored out of time order on purpose
        {"sender": "alice", "content": "I planted tomatoes today", "timestamp": 1_700_000_300.0},
        {"sender": "alice", "content": "Should I water the basil?", "timestamp": 1_700_000_100.0},
        {"sender": "bob", "content": "What soil do carrots like?", "timestamp": 1_700_000_200.5},
        {"sender": "alice", "content": "The tomatoes are red now", "timestamp": 1_700_000_400},
    ]
    for m in messages:
        memory.store_interaction(m)
    memory.store_response("Water basil when the topsoil is dry.", messages[1])
    memory.store_response("Congratulations on the tomatoes!", messages[0])
    memory.store_response("Time to pick them.", messages[3])

    last = memory.retrieve_last_interactions(10)
    assert [(i["content"], i["response"]) for i in last] == [
        ("The tomatoes are red now", "Time to pick them."),
        ("I planted tomatoes today", "Congratulations on the tomatoes!"),
        ("What soil do carrots like?", ""),  # never answered
        ("Should I water the basil?", "Water basil when the topsoil is dry."),
    ]
    assert [i["metadata"]["source"] for i in last] == ["alice", "alice", "bob", "alice"]
    assert [i["metadata"]["timestamp"] for i in last] == [1_700_000_400, 1_700_000_300, 1_700_000_200.5,
                                                          1_700_000_100]
    assert [i["content"] for i in memory.retrieve_last_interactions(2)] == [
        "The tomatoes are red now", "I planted tomatoes today"]
    assert len(memory.retrieve_last_interactions()) == 4  # default n=5


def test_response_links_to_the_message_of_its_sender(memory: MemoryManager) -> None:
    same_time = 1_700_000_000.123456
    odd = "Ann Smith <ann@example.org>"  # not a valid agent name: kept exactly as the source
    to_ann = {"sender": odd, "content": "hello", "timestamp": same_time}
    to_bob = {"sender": "bob", "content": "hello", "timestamp": same_time}
    ann_id = memory.store_interaction(to_ann).id
    bob_id = memory.store_interaction(to_bob).id
    # Ann's first: by content and time alone the newer message (Bob's) would be picked
    assert memory.store_response("Hi Ann!", to_ann).reply_to == ann_id
    assert memory.store_response("Hi Bob!", to_bob).reply_to == bob_id

    replies = {i["metadata"]["source"]: i["response"] for i in memory.retrieve_last_interactions()}
    assert replies == {odd: "Hi Ann!", "bob": "Hi Bob!"}
    agent = memory.account.record(ann_id).agent
    assert agent is not None and check_name(agent) == agent and agent != odd


def test_message_without_timestamp_links_newest_unanswered_first(memory: MemoryManager) -> None:
    ping = {"sender": "carol", "content": "ping"}
    older = memory.store_interaction(ping).id
    newer = memory.store_interaction(ping).id
    assert memory.store_response("pong 1", ping).reply_to == newer
    assert memory.store_response("pong 2", ping).reply_to == older
    assert [i["response"] for i in memory.retrieve_last_interactions()] == ["pong 1", "pong 2"]


def test_unmatched_response_is_stored_unlinked_and_logged(
    memory: MemoryManager, caplog: pytest.LogCaptureFixture,
) -> None:
    memory.store_interaction({"sender": "dan", "content": "Is it going to rain?", "timestamp": 1_700_000_000})
    with caplog.at_level(logging.WARNING, logger="soulpass.facades.skynet"):
        stored = memory.store_response("Yes.", {"sender": "dan", "content": "Is it going to rain?",
                                                "timestamp": 1_700_000_001})  # another time: another message
    assert stored.reply_to is None and memory.account.head() == stored.version == 2
    assert "unlinked" in caplog.text
    assert memory.retrieve_last_interactions()[0]["response"] == ""
    assert getattr(memory.account.record(stored.id), "reply_to", "?") is None


def test_context_keeps_two_reflections_per_five_interactions(memory: MemoryManager) -> None:
    for i in range(6):
        msg = {"sender": "gardener", "content": f"Question {i} about my vegetable garden", "timestamp": 1_000 + i}
        memory.store_interaction(msg)
        memory.store_response(f"Answer {i} about your vegetable garden", msg)
    for i in range(6):
        memory.store_reflection(f"Reflection {i}: my garden advice should mention the season")

    for n, interactions, reflections in [(5, 5, 2), (10, 10, 4), (3, 3, 1), (1, 1, 0)]:
        docs = memory.retrieve_relevant_context("vegetable garden advice", n_results=n)
        flags = [d["is_reflection"] for d in docs]
        assert flags == [False] * interactions + [True] * reflections, n
        for d in docs:
            assert d["is_reflection"] == (d["metadata"]["type"] == "system_reflection")
            assert d["content"].startswith("Reflection" if d["is_reflection"] else ("Question", "Answer"))
            assert set(d) == {"id", "content", "metadata", "score", "is_reflection"}
            assert set(d["metadata"]) == {"source", "timestamp", "type"}


@pytest.mark.parametrize(("config", "key", "mentions"), [
    ({}, "memory_path", "required"),
    ({"memory_path": "MEM", "vector_db_type": "pinecone"}, "vector_db_type", "chroma"),
    ({"memory_path": "MEM", "embedding_model": "text-embedding-3-small"}, "embedding_model", "all-MiniLM-L6-v2"),
    ({"memory_path": "MEM", "account": "../evil"}, "account", "../evil"),
])
def test_bad_config_names_the_key(config: dict[str, Any], key: str, mentions: str, tmp_path: Path) -> None:
    home = tmp_path / "memory"
    config = {k: (str(home) if v == "MEM" else v) for k, v in config.items()}
    with pytest.raises(ConfigError) as err:
        MemoryManager(config)
    assert err.value.details["key"] == key
    assert key in str(err.value) and mentions in str(err.value)
    assert not home.exists()


def test_unknown_config_keys_and_non_dict_config_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"colection.*known: account, embedding_model, memory_path"):
        MemoryManager({"memory_path": str(tmp_path / "m"), "colection": "interactions"})
    with pytest.raises(ConfigError, match="must be a dict"):
        MemoryManager("./data/memory")  # type: ignore[arg-type]
    assert not (tmp_path / "m").exists()


OK_MESSAGE = {"sender": "u1", "content": "hello there", "timestamp": 1_700_000_000}
BAD_CALLS: list[tuple[str, Callable[[MemoryManager], object], str]] = [
    ("no content", lambda m: m.store_interaction({"sender": "u1"}), "content"),
    ("content not text", lambda m: m.store_interaction({"content": 42}), "content"),
    ("blank content", lambda m: m.store_interaction({"content": "  "}), "content"),
    ("NaN timestamp", lambda m: m.store_interaction({"content": "hi", "timestamp": float("nan")}), "timestamp"),
    ("text timestamp", lambda m: m.store_interaction({"content": "hi", "timestamp": "yesterday"}), "timestamp"),
    ("bool timestamp", lambda m: m.store_interaction({"content": "hi", "timestamp": True}), "timestamp"),
    ("huge timestamp", lambda m: m.store_interaction({"content": "hi", "timestamp": 1e20}), "timestamp"),
    ("list sender", lambda m: m.store_interaction({"content": "hi", "sender": ["x"]}), "sender"),
    ("message not a dict", lambda m: m.store_interaction("hi"), "message"),  # type: ignore[arg-type]
    ("no response", lambda m: m.store_response(None, OK_MESSAGE), "response"),  # type: ignore[arg-type]
    ("original without content", lambda m: m.store_response("ok", {"sender": "u1"}), "original_message.content"),
    ("original not a dict", lambda m: m.store_response("ok", "hi"), "original_message"),  # type: ignore[arg-type]
    ("empty reflection", lambda m: m.store_reflection(""), "reflection"),
    ("reflection not text", lambda m: m.store_reflection(3), "reflection"),  # type: ignore[arg-type]
    ("n_results zero", lambda m: m.retrieve_relevant_context("hello", n_results=0), "n_results"),
    ("query not text", lambda m: m.retrieve_relevant_context(5), "query"),  # type: ignore[arg-type]
    ("n negative", lambda m: m.retrieve_last_interactions(-1), "n"),
]


@pytest.mark.parametrize(("call", "field"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_names_the_field_and_stores_nothing(
    memory: MemoryManager, call: Callable[[MemoryManager], object], field: str,
) -> None:
    memory.store_interaction(OK_MESSAGE)
    with pytest.raises(InvalidInput) as err:
        call(memory)
    assert err.value.details["field"] == field and field in str(err.value)
    assert memory.account.head() == 1
    assert [i["content"] for i in memory.retrieve_last_interactions()] == ["hello there"]


def test_refused_write_leaves_no_sandbox_behind(memory: MemoryManager) -> None:
    with pytest.raises(InvalidInput):
        memory.store_interaction({"content": "x" * (soulpass.Limits().max_body_chars + 1)})  # a message body
    with pytest.raises(InvalidInput):
        memory.store_reflection("bad \udcff text")  # a lone surrogate: not UTF-8
    assert memory.account.head() == 0 and memory.account.sandboxes() == []


def test_save_state_is_idempotent_and_close_ends_use(tmp_path: Path) -> None:
    config = {"memory_path": str(tmp_path / "memory"), "vector_db_type": "default"}
    with MemoryManager(config) as memory:
        memory.store_interaction(OK_MESSAGE)
        memory.save_state()
        memory.save_state()
        status = memory.account.index().status()
        assert (status.catalog_version, status.pending_embeddings, memory.account.head()) == (1, 0, 1)
    with pytest.raises(Conflict, match="closed"):
        memory.store_interaction(OK_MESSAGE)
    memory.close()  # again: no error
    with MemoryManager(config) as reopened:
        assert reopened.account.head() == 1
        assert reopened.retrieve_last_interactions()[0]["content"] == "hello there"
