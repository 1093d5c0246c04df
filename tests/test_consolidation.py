"""Consolidation rules (DESIGN §4, seed 000 "Consolidation Rules").

append_all for episodes (permanent ids, crosslinks rewritten), validate_and_merge for facts
(confidence > 0.7, dedupe, contradiction supersedes, GKS updated), latest_wins for states,
careful_merge for core memory, rebase when the master moved on, YAML rules, dry runs.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed, ConfigError, Planned, Rules
from soulpass.records import SemanticFact
from soulpass.store.keys import record_path
from treehash import digest


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Durability is tested by the crash tests; here fsync would only make the cases slow."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.fixture
def acct(tmp_path: Path) -> soulpass.Account:
    return soulpass.open(tmp_path).account("alice", create=True)


def archive(sb: soulpass.Sandbox) -> Committed:
    res = sb.archive()
    assert isinstance(res, Committed), res
    return res


def facts_by_object(acct: soulpass.Account, at: int | None = None) -> dict[str, SemanticFact]:
    out = {}
    for f in acct.records("fact", at):
        assert isinstance(f, SemanticFact)
        out[f.object] = f
    return out


def edges(acct: soulpass.Account, at: int | None = None) -> set[tuple[str, str, str]]:
    """The knowledge graph as (subject label, predicate, object label), labels normalised."""
    graph = acct.gks(at)
    label = {n.id: n.label.lower() for n in graph.nodes}
    return {(label[e.source], e.predicate, label[e.target]) for e in graph.edges}




# --- validate_and_merge -----------------------------------------------------------------------


@pytest.mark.parametrize(("confidence", "accepted"), [(0.5, False), (0.7, False), (0.7001, True), (0.71, True),
                                                      (1.0, True)])
def test_fact_confidence_threshold(acct: soulpass.Account, confidence: float, accepted: bool) -> None:
    sb = acct.create_sandbox("s")
    cid = sb.add_fact("User", "likes", "coffee", confidence=confidence)
    res = archive(sb)
    entry = acct.log()[-1].to_json()
    if accepted:
        assert res.plan.added == {"fact": [res.plan.id_map[cid]]}
        assert entry["rejected"] == []
        assert acct.record(res.plan.id_map[cid]).confidence == confidence
    else:
        assert "fact" not in res.plan.added and cid not in res.plan.id_map
        assert [r["candidate"] for r in entry["rejected"]] == [cid]
        assert "0.7" in entry["rejected"][0]["why"] and str(confidence) in entry["rejected"][0]["why"]
        assert list(acct.records("fact")) == []
        assert edges(acct) == set()


def test_duplicate_by_normalised_spo_across_sessions(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.add_fact(content="User likes Coffee.", confidence=0.9)
    first = archive(s1)
    (fid,) = first.plan.added["fact"]
    s2 = acct.create_sandbox("s2")
    dup = s2.add_fact(content="user likes coffee", confidence=0.95)
    res = s2.archive()
    assert isinstance(res, soulpass.Unchanged), res  # only a repeat: no version (issue 16)
    assert "fact" not in res.plan.added
    assert [(d["candidate"], d["duplicate_of"]) for d in res.plan.duplicates] == [(dup, fid)]
    assert acct.head() == first.version
    assert [f.id for f in acct.records("fact")] == [fid]
    assert edges(acct) == {("user", "likes", "coffee")}


def test_duplicate_within_one_session(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    a = sb.add_fact("User", "likes", "coffee", confidence=0.9)
    b = sb.add_fact("user", "Likes", "Coffee!", confidence=0.8)
    c = sb.add_fact(content="User likes coffee", confidence=0.99)
    res = archive(sb)
    assert res.plan.added == {"fact": [res.plan.id_map[a]]}
    assert {d["candidate"] for d in res.plan.duplicates} == {b, c}
    assert all(d["duplicate_of"] == res.plan.id_map[a] for d in res.plan.duplicates)
    assert len(list(acct.records("fact"))) == 1


def test_content_only_candidate_is_split_into_spo(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    cid = sb.add_fact(content="User likes coffee", confidence=0.9)
    res = archive(sb)
    fact = acct.record(res.plan.id_map[cid])
    assert isinstance(fact, SemanticFact)
    assert (fact.subject, fact.predicate, fact.object) == ("User", "likes", "coffee")
    assert fact.text == "User likes coffee"
    assert fact.valid_from_version == 1 and fact.superseded_by is None
    assert edges(acct) == {("user", "likes", "coffee")}


@pytest.mark.parametrize(
    ("content", "spo"),
    [("User lives in Bangkok.", ("User", "lives in", "Bangkok")),
     ("Alice is married to Bob", ("Alice", "is married to", "Bob")),
     ("User works at Acme Corp", ("User", "works at", "Acme Corp"))],
)
def test_multiword_predicates_split(acct: soulpass.Account, content: str, spo: tuple[str, str, str]) -> None:
    sb = acct.create_sandbox("s")
    cid = sb.add_fact(content=content, confidence=0.9)
    fact = acct.record(archive(sb).plan.id_map[cid])
    assert isinstance(fact, SemanticFact)
    assert (fact.subject, fact.predicate, fact.object) == spo


def test_functional_predicate_contradiction_supersedes(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.add_fact(content="User lives in Bangkok", confidence=0.9)
    v1 = archive(s1)
    (old_id,) = v1.plan.added["fact"]
    old_path = acct.store.path / record_path(old_id)
    assert edges(acct) == {("user", "lives in", "bangkok")}

    s2 = acct.create_sandbox("s2")
    s2.add_fact(content="User lives in Paris", confidence=0.9)
    v2 = archive(s2)
    (new_id,) = v2.plan.added["fact"]
    assert v2.plan.superseded == [{"fact": old_id, "by": new_id}]
    assert acct.log()[-1].superseded == [{"fact": old_id, "by": new_id}]

    old, new = acct.record(old_id), acct.record(new_id)
    assert isinstance(old, SemanticFact) and isinstance(new, SemanticFact)
    assert old.superseded_by == new_id and old.valid_to_version == v2.version
    assert old.object == "Bangkok" and old.valid_from_version == v1.version
    assert new.supersedes == (old_id,) and new.superseded_by is None and new.valid_from_version == v2.version

    # the old content at its original version, without the supersession
    then = acct.show(old_id, at=v1.version)
    assert isinstance(then, SemanticFact)
    assert then.superseded_by is None and then.valid_to_version is None and then.object == "Bangkok"
    assert then.version == v1.version

    # GKS: Paris edge present, Bangkok edge gone (and back at v1)
    assert edges(acct) == {("user", "lives in", "paris")}
    assert edges(acct, v1.version) == {("user", "lives in", "bangkok")}

    # the old fact file is never deleted: still at HEAD, and its pre-supersession copy is in history/
    assert {f.id for f in acct.records("fact")} == {old_id, new_id}
    assert old_path.exists() and '"superseded_by": "' + new_id in old_path.read_text().replace("\n", "")
    hist = list((acct.store.path / "history").rglob(f"{old_id}/*.json"))
    assert len(hist) == 1


def test_antonym_supersedes_for_same_object(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.add_fact(content="User likes coffee", confidence=0.9)
    s1.add_fact(content="User likes tea", confidence=0.9)
    v1 = archive(s1)
    coffee, tea = v1.plan.added["fact"]
    s2 = acct.create_sandbox("s2")
    s2.add_fact(content="User dislikes coffee", confidence=0.9)
    v2 = archive(s2)
    (dislike,) = v2.plan.added["fact"]
    assert v2.plan.superseded == [{"fact": coffee, "by": dislike}]
    by_id = {f.id: f for f in acct.records("fact")}
    assert by_id[coffee].superseded_by == dislike
    assert by_id[tea].superseded_by is None  # another object is untouched
    assert edges(acct) == {("user", "dislikes", "coffee"), ("user", "likes", "tea")}


def test_non_functional_predicate_does_not_supersede(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.add_fact(content="User likes coffee", confidence=0.9)
    archive(s1)
    s2 = acct.create_sandbox("s2")
    s2.add_fact(content="User likes tea", confidence=0.9)
    v2 = archive(s2)
    assert v2.plan.superseded == [] and v2.plan.duplicates == []
    facts = facts_by_object(acct)
    assert set(facts) == {"coffee", "tea"}
    assert all(f.superseded_by is None for f in facts.values())
    assert edges(acct) == {("user", "likes", "coffee"), ("user", "likes", "tea")}


def test_contradiction_within_one_session(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    a = sb.add_fact(content="Bob lives in Oslo", confidence=0.9)
    b = sb.add_fact(content="Bob lives in Rome", confidence=0.9)
    res = archive(sb)
    oslo, rome = res.plan.id_map[a], res.plan.id_map[b]
    assert res.plan.superseded == [{"fact": oslo, "by": rome}]
    assert acct.record(oslo).superseded_by == rome
    assert edges(acct) == {("bob", "lives in", "rome")}


# --- latest_wins -------------------------------------------------------------------------------


def test_state_latest_wins_across_sessions_with_history(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.update_state("ire", {"a": 1, "b": 2})
    s1.update_state("ire", {"b": 3})
    v1 = archive(s1)
    assert acct.state("ire").data == {"a": 1, "b": 3}
    assert v1.plan.state_changes == [{"state": "ire", "keys": ["a", "b"]}]
    s2 = acct.create_sandbox("s2")
    s2.update_state("ire_state", {"b": 4, "c": 5})  # the seed's "<name>_state" spelling
    v2 = archive(s2)
    assert acct.state("ire").data == {"a": 1, "b": 4, "c": 5}
    assert acct.state("ire", at=v1.version).data == {"a": 1, "b": 3}
    assert v2.plan.state_changes == [{"state": "ire", "keys": ["b", "c"]}]
    hist = sorted((acct.store.path / "history" / "10_state" / "ire_state").glob("*.json"))
    assert [p.stem for p in hist] == [f"{v2.version:08d}"]
    assert '"b": 3' in hist[0].read_text()
    assert "core/10_state/ire_state.json" in acct.log()[-1].replaced


def test_state_delta_older_than_master_keeps_master(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.update_state("ire", {"mood": "calm", "energy": 1})
    v1 = archive(s1)
    s2 = acct.create_sandbox("s2")
    s2._buffer.append("state_delta", {"name": "ire", "data": {"mood": "angry"}},
                      at=datetime(2000, 1, 1, tzinfo=UTC))
    s2.update_state("ire", {"energy": 2})
    v2 = archive(s2)
    assert acct.state("ire").data == {"mood": "calm", "energy": 2}
    conflicts = [c for c in v2.plan.conflicts if c["type"] == "state_older_than_master"]
    assert [(c["state"], c["keys"]) for c in conflicts] == [("ire", ["mood"])]
    assert v2.plan.state_changes == [{"state": "ire", "keys": ["energy"]}]
    assert acct.log()[-1].conflicts == v2.plan.conflicts
    assert v1.version + 1 == v2.version


def test_state_only_old_delta_writes_nothing(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.update_state("ire", {"mood": "calm"})
    archive(s1)
    s2 = acct.create_sandbox("s2")
    s2._buffer.append("state_delta", {"name": "ire", "data": {"mood": "angry"}}, at=datetime(2000, 1, 1, tzinfo=UTC))
    v2 = archive(s2)
    assert v2.plan.state_changes == []
    assert "core/10_state/ire_state.json" not in acct.log()[-1].replaced
    assert acct.state("ire").data == {"mood": "calm"} and acct.state("ire").version == 1


def test_profile_latest_wins(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.update_profile({"name": "Ann", "city": "Bangkok"})
    archive(s1)
    s2 = acct.create_sandbox("s2")
    s2.update_profile({"city": "Paris"})
    archive(s2)
    assert acct.user_profile().fields == {"name": "Ann", "city": "Paris"}
    assert acct.user_profile(at=1).fields == {"name": "Ann", "city": "Bangkok"}


# --- careful_merge ---------------------------------------------------------------------------


def test_core_careful_merge(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.propose_core("identity", "EVA", key="name", confidence=0.95, reason="introduced herself")
    s1.propose_core("identity", "purple", key="color", confidence=0.89, reason="guess")
    s1.propose_core("values", "honesty", confidence=0.95, reason="said so")
    v1 = archive(s1)
    core = acct.core_memory()
    assert core.identity == {"name": "EVA"} and core.values == ("honesty",)
    below = [r for r in v1.plan.rejected if r.get("key") == "color"]
    assert len(below) == 1 and "0.89" in below[0]["why"] and "0.9" in below[0]["why"]
    assert [(c["section"], c["key"], c["old"], c["new"], c["reason"]) for c in v1.plan.core_changes] == [
        ("identity", "name", None, "EVA", "introduced herself"), ("values", None, None, "honesty", "said so")]
    assert acct.log()[-1].core_changes == v1.plan.core_changes

    s2 = acct.create_sandbox("s2")
    s2.propose_core("identity", "BOB", key="name", confidence=0.99, reason="wants a new name")
    s2.propose_core("identity", "Bangkok", key="home", confidence=0.95, reason="lives there")
    s2.propose_core("values", "curiosity", confidence=0.95, reason="asked a lot")
    s2.propose_core("values", "honesty", confidence=0.95, reason="again")
    v2 = archive(s2)
    core = acct.core_memory()
    assert core.identity == {"name": "EVA", "home": "Bangkok"}
    assert core.values == ("honesty", "curiosity")
    kept = [r for r in v2.plan.rejected if r.get("key") == "name"]
    assert len(kept) == 1 and "preserved" in kept[0]["why"] and kept[0]["value"] == "BOB"
    entry = acct.log()[-1].to_json()
    assert {(c["key"], c["new"]) for c in entry["core_changes"]} == {("home", "Bangkok"), (None, "curiosity")}
    assert all(c["reason"] for c in entry["core_changes"])
    assert acct.core_memory(at=v1.version).identity == {"name": "EVA"}


def test_core_unchanged_when_everything_rejected(acct: soulpass.Account) -> None:
    s1 = acct.create_sandbox("s1")
    s1.propose_core("identity", "EVA", key="name", confidence=0.95, reason="r")
    archive(s1)
    before = acct.show("core")
    s2 = acct.create_sandbox("s2")
    s2.propose_core("identity", "BOB", key="name", confidence=0.95, reason="r")
    v2 = archive(s2)
    assert v2.plan.core_changes == []
    assert "core/05_Core_Memory/Core_memory.json" not in acct.log()[-1].replaced
    assert acct.show("core") == before


def test_allow_overwrite_rule_permits_change(tmp_path: Path) -> None:
    rules = Rules.from_yaml("core: {rule: careful_merge, min_confidence: 0.9, allow_overwrite: true}")
    acct = soulpass.open(tmp_path, rules=rules).account("alice", create=True)
    s1 = acct.create_sandbox("s1")
    s1.propose_core("identity", "EVA", key="name", confidence=0.95, reason="first")
    archive(s1)
    s2 = acct.create_sandbox("s2")
    s2.propose_core("identity", "EVA-2", key="name", confidence=0.95, reason="renamed")
    v2 = archive(s2)
    assert acct.core_memory().identity == {"name": "EVA-2"}
    assert [(c["old"], c["new"], c["reason"]) for c in v2.plan.core_changes] == [("EVA", "EVA-2", "renamed")]
    assert acct.core_memory(at=1).identity == {"name": "EVA"}


# --- rebase ----------------------------------------------------------------------------------


def test_rebase_two_sandboxes_from_the_same_version(acct: soulpass.Account) -> None:
    s0 = acct.create_sandbox("s0")
    s0.update_state("ire", {"x": 0})
    archive(s0)
    v = acct.head()
    a, b = acct.create_sandbox("A"), acct.create_sandbox("B")
    assert a.info.parent_version == b.info.parent_version == v
    ta = a.add_turn("user", "from A")
    a.write_episode({"summary": {"action_taken": "A"}, "turn_refs": [ta]})
    a.propose_core("identity", "EVA", key="name", confidence=0.95, reason="A says")
    tb = b.add_turn("user", "from B")
    b.write_episode({"summary": {"action_taken": "B"}, "turn_refs": [tb]})
    b.propose_core("identity", "BOB", key="name", confidence=0.95, reason="B says")
    b.propose_core("identity", "blue", key="color", confidence=0.95, reason="B says")
    ra = archive(a)
    rb = archive(b)
    assert (ra.version, rb.version) == (v + 1, v + 2)
    assert ra.plan.rebased is False and rb.plan.rebased is True
    log = [e.to_json() for e in acct.log()]
    assert log[-2]["rebased"] is None
    assert log[-1]["rebased"] == {"from": v, "onto": v + 1}
    # both sets of episodes are present, each pointing at its own turn
    eps = {e.summary.action_taken: e for e in acct.records("episode")}
    assert set(eps) == {"A", "B"}
    assert acct.record(eps["A"].turn_refs[0]).text_excerpt == "from A"
    assert acct.record(eps["B"].turn_refs[0]).text_excerpt == "from B"
    # the core field changed on both sides keeps the master's (A's) value and reports it
    assert acct.core_memory().identity == {"name": "EVA", "color": "blue"}
    conflicts = [c for c in rb.plan.conflicts if c.get("key") == "name"]
    assert len(conflicts) == 1 and conflicts[0]["value"] == "BOB" and conflicts[0]["kept"] == "EVA"
    assert conflicts[0] in log[-1]["conflicts"]
    assert acct.diff(v, v + 2).rebases == [{"version": v + 2, "from": v, "onto": v + 1}]


def test_rebase_revalidates_facts_and_states(acct: soulpass.Account) -> None:
    a, b = acct.create_sandbox("A"), acct.create_sandbox("B")
    b.update_state("ire", {"x": "B-early", "y": "B"})  # B's event is older than A's
    a.update_state("ire", {"x": "A-late"})
    a.add_fact(content="User lives in Bangkok", confidence=0.9)
    a.add_fact(content="User likes coffee", confidence=0.9)
    b.add_fact(content="User lives in Paris", confidence=0.9)
    dup = b.add_fact(content="user likes coffee", confidence=0.9)
    ra = archive(a)
    rb = archive(b)
    bangkok = facts_by_object(acct)["Bangkok"]
    paris = facts_by_object(acct)["Paris"]
    assert rb.plan.superseded == [{"fact": bangkok.id, "by": paris.id}]
    assert [d["candidate"] for d in rb.plan.duplicates] == [dup]
    assert acct.state("ire").data == {"x": "A-late", "y": "B"}
    assert any(c["type"] == "state_older_than_master" and c["keys"] == ["x"] for c in rb.plan.conflicts)
    assert ra.version == 1 and rb.version == 2


# --- rules from YAML ----------------------------------------------------------------------------


def test_rules_yaml_min_confidence_changes_acceptance(tmp_path: Path) -> None:
    loose = Rules.from_yaml("semantic:\n  rule: validate_and_merge\n  min_confidence: 0.5\n")
    assert loose.semantic.min_confidence == 0.5 and loose.core.min_confidence == 0.9
    results = {}
    for name, rules in (("default", Rules()), ("loose", loose)):
        acct = soulpass.open(tmp_path / name, rules=rules).account("alice", create=True)
        sb = acct.create_sandbox("s")
        sb.add_fact("User", "likes", "tea", confidence=0.6)
        results[name] = archive(sb).plan.added.get("fact", [])
    assert results["default"] == [] and len(results["loose"]) == 1


def test_rules_yaml_round_trip() -> None:
    rules = Rules.from_yaml("semantic: {functional_predicates: [is, owns]}\ncore: {allow_overwrite: true}")
    assert rules.semantic.functional_predicates == ("is", "owns") and rules.core.allow_overwrite is True
    assert Rules.from_yaml(rules.to_yaml()) == rules
    assert Rules.from_yaml("") == Rules()


@pytest.mark.parametrize(
    "text",
    ["semantic: {min_confidence: 0.5, shiny: true}", "unknown_section: {}", "core: {rule: yolo}",
     "semantic: {min_confidence: 1.5}", "states: 3", "- a\n- b"],
)
def test_rules_yaml_invalid_is_config_error(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        Rules.from_yaml(text, source="rules.yaml")
    assert "rules.yaml" in str(info.value) and info.value.details == {"path": "rules.yaml"}


@pytest.mark.parametrize("text", ["semantic: {min_confidence: [", "core:\n\t- x", "a: b: c"])
def test_rules_invalid_yaml_is_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="YAML"):
        Rules.from_yaml(text)


def test_custom_functional_predicate(tmp_path: Path) -> None:
    rules = Rules.from_yaml("semantic: {functional_predicates: [drives]}")
    acct = soulpass.open(tmp_path, rules=rules).account("alice", create=True)
    s1 = acct.create_sandbox("s1")
    s1.add_fact("User", "drives", "a Volvo", confidence=0.9)
    archive(s1)
    s2 = acct.create_sandbox("s2")
    s2.add_fact("User", "drives", "a Tesla", confidence=0.9)
    assert len(archive(s2).plan.superseded) == 1
    s3 = acct.create_sandbox("s3")
    s3.add_fact("User", "lives in", "Oslo", confidence=0.9)
    archive(s3)
    s4 = acct.create_sandbox("s4")
    s4.add_fact("User", "lives in", "Rome", confidence=0.9)  # no longer functional under these rules
    assert archive(s4).plan.superseded == []


# --- dry run ----------------------------------------------------------------------------------


def test_dry_run_plans_and_writes_nothing(acct: soulpass.Account) -> None:
    s0 = acct.create_sandbox("s0")
    s0.add_fact(content="User lives in Bangkok", confidence=0.9)
    archive(s0)
    sb = acct.create_sandbox("s")
    t = sb.add_turn("user", "I moved to Paris")
    sb.add_fact(content="User lives in Paris", confidence=0.9, source_refs=[t])
    sb.update_state("ire", {"mood": "excited"})
    sb.propose_core("identity", "EVA", key="name", confidence=0.95, reason="r")
    before = digest(acct.store.path)
    head, log_len = acct.head(), len(acct.log())
    res = sb.archive(dry_run=True)
    assert isinstance(res, Planned)
    plan = res.plan
    assert plan.version == head + 1 and plan.base_version == head
    assert set(plan.added) == {"turn_user", "fact"}
    assert len(plan.superseded) == 1 and plan.state_changes == [{"state": "ire", "keys": ["mood"]}]
    assert [c["key"] for c in plan.core_changes] == ["name"]
    assert plan.summary()["version"] == head + 1
    assert digest(acct.store.path) == before
    assert acct.head() == head and len(acct.log()) == log_len
    assert not sb.archived and sb.id in {s.sandbox_id for s in acct.sandboxes()}
    sb.add_turn("user", "still writable")  # the sandbox is still live
    real = archive(sb)
    assert real.version == head + 1
    assert {k: v for k, v in real.plan.id_map.items() if k in plan.id_map} == plan.id_map


# --- crosslinks -------------------------------------------------------------------------------


def test_crosslinks_are_rewritten_to_permanent_ids(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    tu = sb.add_turn("user", "hi")
    tl = sb.add_turn("eva", "hello", reply_to=tu)
    ep = sb.write_episode({"summary": {"action_taken": "greeted"}, "turn_refs": [tu, tl]})
    f = sb.add_fact("User", "greeted", "EVA", confidence=0.9, source_refs=[tu, ep])
    res = archive(sb)
    m = res.plan.id_map
    assert all(not k.startswith(("EP_", "TU_", "TL_", "SF_")) for k in m)
    assert m[tu].startswith("TU_") and m[tl].startswith("TL_") and m[ep].startswith("EP_") and m[f].startswith("SF_")
    episode = acct.record(m[ep])
    assert episode.turn_refs == (m[tu], m[tl]) and episode.episode_id == m[ep]
    user, llm = acct.record(m[tu]), acct.record(m[tl])
    assert user.episode_ref == m[ep] and llm.episode_ref == m[ep]
    assert llm.reply_to == m[tu]
    assert acct.record(m[f]).source_refs == (m[tu], m[ep])
    assert res.plan.conflicts == []
    # every stored id is permanent, nothing temporary survives in the files
    for p in (acct.store.path / "core").rglob("*.json"):
        assert "_temp_" not in p.read_text(), p


def test_dangling_temp_ref_is_reported_not_kept(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    tu = sb.add_turn("user", "hi")
    ghost = "tu_temp_deadbeef0000"
    ep = sb.write_episode({"summary": {"action_taken": "x"}, "turn_refs": [tu, ghost]})
    f = sb.add_fact("User", "says", "hi", confidence=0.9, source_refs=["ep_temp_0123456789ab"])
    tl = sb.add_turn("eva", "reply", reply_to="tu_temp_aaaaaaaaaaaa")
    res = archive(sb)
    m = res.plan.id_map
    # the owning record may be named by its temporary or its new permanent id
    back = {v: k for k, v in m.items()}
    unresolved = {(back.get(c["record"], c["record"]), c["ref"])
                  for c in res.plan.conflicts if c["type"] == "unresolved_reference"}
    assert unresolved == {(ep, ghost), (f, "ep_temp_0123456789ab"), (tl, "tu_temp_aaaaaaaaaaaa")}
    assert acct.record(m[ep]).turn_refs == (m[tu],)
    assert acct.record(m[f]).source_refs == ()
    assert acct.record(m[tl]).reply_to is None
    assert acct.log()[-1].conflicts == res.plan.conflicts


def test_permanent_ids_continue_across_versions(acct: soulpass.Account) -> None:
    when = "2026-01-28T10:00:00+00:00"
    ids: list[str] = []
    for n in range(3):
        sb = acct.create_sandbox(f"s{n}")
        eid = sb.write_episode({"episode_id": f"e{n}", "timestamp": when, "turn_1": {"speaker": "user", "text": "x"}})
        ids.append(archive(sb).plan.id_map[eid])
    assert ids == ["EP_20260128_001", "EP_20260128_002", "EP_20260128_003"]


def test_archived_sandbox_is_gone_and_closed(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "x")
    res = archive(sb)
    assert not (acct.store.path / "sandboxes" / sb.id).exists()
    assert acct.archive(sb.id) == soulpass.AlreadyArchived(sb.id, res.version)  # idempotent, from the log
    with pytest.raises(soulpass.Conflict):
        sb.add_turn("user", "too late")
    assert acct.head() == res.version and len(acct.log()) == 1


def test_dangling_permanent_ref_is_reported(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    ghost = "TU_20990101_001"  # well-formed, but no such record in the master
    sb.write_episode({"summary": {"action_taken": "x"}, "turn_refs": [ghost]})
    res = archive(sb)
    reported = [c for c in res.plan.conflicts if c.get("ref") == ghost]
    assert len(reported) == 1


def test_source_ref_to_a_duplicate_candidate_points_at_the_existing_fact(acct: soulpass.Account) -> None:
    s0 = acct.create_sandbox("s0")
    s0.add_fact(content="User likes coffee", confidence=0.9)
    (coffee,) = archive(s0).plan.added["fact"]
    sb = acct.create_sandbox("s")
    dup = sb.add_fact(content="user likes coffee", confidence=0.9)  # a duplicate of `coffee`
    milk = sb.add_fact("User", "likes", "milk in coffee", confidence=0.9, source_refs=[dup])
    res = archive(sb)
    refs = acct.record(res.plan.id_map[milk]).source_refs
    assert refs == (coffee,)
    assert [c for c in res.plan.conflicts if c["type"] == "unresolved_reference"] == []


def test_a_rebased_core_proposal_needs_the_parent_snapshot(acct: soulpass.Account) -> None:
    """The careful merge compares with the core the sandbox saw: a planner handed only HEAD refuses."""
    from soulpass.consolidation.plan import plan_consolidation
    from soulpass.errors import InvalidInput

    stale, other = acct.create_sandbox("stale"), acct.create_sandbox("other")
    other.add_fact("User", "likes", "tea", confidence=0.9)
    other.archive()
    stale.propose_core("identity", "Ada", key="name", confidence=0.95, reason="told")
    events = stale._buffer.events()
    with pytest.raises(InvalidInput, match="rebased"):
        plan_consolidation(acct.store.snapshot(), stale.info, events, Rules(), datetime.now(UTC))
    plan = plan_consolidation(acct.store.snapshot(), stale.info, events, Rules(), datetime.now(UTC),
                              parent=acct.store.snapshot(stale.info.parent_version))
    assert plan.rebased and plan.core_changes[0]["new"] == "Ada" and acct.head() == 1  # planned, not written
