"""A seeded account for the memory browser's tests: versions with turns, a journal in Markdown, a
fact superseded by another, an episode, a live sandbox with an agent's clipboard; keys for it, for
another account and an admin key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import soulpass
from soulpass.agent import AgentMemory
from soulpass.server.keyring import key_store


@dataclass
class UiWorld:
    home: Path | str  # a folder, or a postgresql:// URL
    key: str  # opens "maya"
    other_key: str  # opens "noor" only
    admin_key: str
    turn_id: str  # "I adopted a grey cat called Pixel" (version 1)
    old_fact: str  # User lives in Lisbon (version 1), superseded at version 2
    new_fact: str  # User lives in Porto (version 2)
    porto_turn_id: str  # "We moved from Lisbon to Porto this week" (version 2)
    journal_id: str
    episode_id: str
    sandbox_id: str  # live, with the agent "eva"'s clipboard
    head: int
    graph_key: str  # opens "ravi": a knowledge graph of 30 entities (GRAPH_FACTS)


# "ravi"'s facts: 30 entities, a hub with many edges, chains and a pair joined twice.
GRAPH_FACTS = (
    [("Ravi", "knows", name) for name in ("Ann", "Ben", "Chloe", "Dara", "Emil", "Farah", "Goran", "Hana")]
    + [("Ravi", "lives in", "Lisbon"), ("Ravi", "works at", "Acme Robotics"), ("Ravi", "owns", "a red bicycle"),
       ("Ravi", "plays", "the cello"), ("Ravi", "studied at", "Coimbra University")]
    + [("Ann", "lives in", "Porto"), ("Ben", "lives in", "Berlin"), ("Chloe", "works at", "Acme Robotics"),
       ("Dara", "is married to", "Emil"), ("Farah", "teaches", "mathematics"), ("Goran", "drives", "a blue van"),
       ("Hana", "grows", "tomatoes"), ("Ann", "has a dog called", "Biscuit"), ("Ben", "speaks", "German"),
       ("Chloe", "collects", "vinyl records"), ("Dara", "runs", "marathons"), ("Emil", "cooks", "ramen"),
       ("Farah", "lives in", "Lisbon"), ("Acme Robotics", "is based in", "Berlin"), ("Biscuit", "is a", "beagle"),
       ("Goran", "visits", "Porto"), ("Hana", "studied at", "Coimbra University"), ("Lisbon", "is in", "Portugal"),
       ("Porto", "is in", "Portugal"), ("Ravi", "met", "Ann"), ("Ivo", "repairs", "a red bicycle"),
       ("Ivo", "lives in", "Faro"), ("Faro", "is in", "Portugal"), ("Julia", "sings in", "a choir"),
       ("Julia", "knows", "Hana")]
)


def seed(home: Path | str) -> UiWorld:
    sp = soulpass.open(home, embedder="none")
    keys = key_store(sp)
    acct = sp.create_account("maya")
    sb = acct.create_sandbox("monday chat")
    turn = sb.add_turn("user", "I adopted a grey cat called Pixel")
    sb.add_turn("assistant", "Pixel is a lovely name for a grey cat!")
    sb.add_fact(content="User lives in Lisbon", confidence=0.9)
    sb.add_journal("# Pixel arrives\n\nMaya adopted **Pixel**, a grey cat.\n\n- likes boxes\n- <b>bold?</b>",
                   title="pixel", tags=("pets",))
    v1 = sb.archive()
    turn_id = v1.plan.id_map[turn]
    (old_fact,) = v1.plan.added["fact"]
    (journal_id,) = [j["id"] for j in v1.plan.journal]
    sb = acct.create_sandbox("tuesday chat")
    sb.add_fact(content="User lives in Porto", confidence=0.95)
    porto_turn = sb.add_turn("user", "We moved from Lisbon to Porto this week")
    v2 = sb.archive()
    porto_turn_id = v2.plan.id_map[porto_turn]
    (new_fact,) = v2.plan.added["fact"]
    sb = acct.create_sandbox("story")
    t1 = sb.add_turn("user", "The shelter said Pixel was shy")
    t2 = sb.add_turn("assistant", "Shy cats often warm up in a week")
    sb.write_episode({"summary": {"action_taken": "told the story of adopting Pixel", "key_outcome": "Pixel is shy"},
                      "turn_refs": [t1, t2]})
    AgentMemory(sb).clipboard_add("eva", "Pixel's vet is Dr. Sousa")  # committed with version 3
    sb.add_fact(content="Pixel maybe likes jazz", confidence=0.4)  # refused at version 3: too unsure
    v3 = sb.archive()
    (episode_id,) = v3.plan.added["episode"]
    live = acct.create_sandbox("wednesday chat")
    mem = AgentMemory(live)
    mem.clipboard_add("eva", "Ask how Pixel is settling in")
    mem.log("eva", "checking on the cat", kind="intent")
    other = sp.create_account("noor")
    osb = other.create_sandbox("x")
    osb.add_turn("user", "Noor's secret word is heliotrope")
    osb.archive()
    graph = sp.create_account("ravi")
    gsb = graph.create_sandbox("people")
    for subject, predicate, obj in GRAPH_FACTS:
        gsb.add_fact(subject, predicate, obj, confidence=0.95)
    gsb.archive()
    return UiWorld(home=home, key=keys.create("maya").secret, other_key=keys.create("noor").secret,
                   admin_key=keys.create(None).secret, turn_id=turn_id, old_fact=old_fact, new_fact=new_fact,
                   porto_turn_id=porto_turn_id,
                   journal_id=journal_id, episode_id=episode_id, sandbox_id=live.id, head=v3.version,
                   graph_key=keys.create("ravi").secret)
