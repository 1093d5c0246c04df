"""Versions: the seed's MSP flow (000_…) and the engine's log / diff / show --at / rollback.

The seed's example flow: master v1 with 100 episodes; sandbox A adds 3 -> v2 (103); sandbox B
adds 2 -> v3 (105). The master is read-only during a session; a discarded sandbox leaves no
trace; any past version can be read back, and rollback makes a *new* version equal to an old
one without destroying history.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass import MSP, Committed, Conflict, InvalidInput, NotFound
from soulpass.records import MasterState, SemanticFact, SessionBuffer
from treehash import digest

USER = "User01"
KINDS = ("episode", "turn_user", "turn_llm", "fact", "sensory")


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Durability is tested by the crash tests; here fsync would only make the cases slow."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)




MASTER = ("core", "log", "history")


def seed_episode(i: int, when: str = "2025-12-17T09:00:00Z") -> dict[str, Any]:
    """An episode in the shape of seed 000 (inline turns, RI_global, rms_annotation)."""
    return {
        "episode_id": f"ep_{i:03d}",
        "session_id": "sandbox_123",
        "timestamp": when,
        "turn_1": {"speaker": "user", "text": f"สวัสดี EVA #{i}"},
        "turn_2": {"speaker": "eva", "text": f"Hello again #{i}"},
        "RI_global": 0.85,
        "encoding_level": "L2_standard",
        "rms_annotation": {"arousal": 0.3, "index": i},
    }


# --- the seed flow through the MSP facade ------------------------------------------------------


def test_seed_example_flow_100_103_105(tmp_path: Path) -> None:
    msp = MSP(tmp_path)
    assert msp.get_master_version(USER) == 0

    # 09:00 master v1 with 100 episodes
    s0 = msp.create_sandbox(USER, "Sandbox 08:00")
    for i in range(100):
        msp.write_episode(s0, seed_episode(i))
    v1 = msp.consolidate_session(s0)
    assert isinstance(v1, MasterState)
    assert v1.version == 1 and v1.user_id == USER
    assert len(v1.episodic_memory) == 100 and v1.metadata["total_episodes"] == 100
    assert v1.metadata["total_sessions"] == 1
    ids = sorted(e["episode_id"] for e in v1.episodic_memory)
    assert ids == [f"EP_20251217_{n:03d}" for n in range(1, 101)]  # the date is the seed's timestamp

    # 09:30 sandbox A clones v1; chatting leaves the master unchanged
    a = msp.create_sandbox(USER, "Sandbox 09:30")
    assert msp.get_session_buffer(a).parent_version == 1
    for i in (101, 102, 103):
        msp.write_episode(a, seed_episode(i, "2025-12-17T09:35:00Z"))
    assert msp.get_master_version(USER) == 1
    assert len(msp.load_master_state(USER).episodic_memory) == 100
    v2 = msp.consolidate_session(a)
    assert v2.version == 2 and len(v2.episodic_memory) == 103
    with pytest.raises(NotFound):
        msp.load_sandbox(a)  # "Delete Buffer A"

    # 10:30 sandbox B clones v2
    b = msp.create_sandbox(USER, "Sandbox 10:30")
    assert msp.get_session_buffer(b).parent_version == 2
    for i in (104, 105):
        msp.write_episode(b, seed_episode(i, "2025-12-17T10:35:00Z"))
    v3 = msp.consolidate_session(b)
    assert v3.version == 3 and len(v3.episodic_memory) == 105
    assert v3.metadata == {**v3.metadata, "total_episodes": 105, "total_sessions": 3}

    # what a seed episode became: inline turns are turn records, extras are kept
    by_source = {e["annotations"]["source_episode_id"]: e for e in v3.episodic_memory}
    assert set(by_source) == {f"ep_{i:03d}" for i in range(106)} - {"ep_100"}
    ep = by_source["ep_104"]
    assert ep["RI_global"] == 0.85 and ep["encoding_level"] == "L2_standard"
    assert ep["annotations"]["rms_annotation"] == {"arousal": 0.3, "index": 104}
    assert ep["session_id"] == b
    engine = msp.engine.account(USER)
    tu, tl = (engine.record(r) for r in ep["turn_refs"])
    assert tu.kind == "turn_user" and tu.text_excerpt == "สวัสดี EVA #104" and tu.episode_ref == ep["id"]
    assert tl.kind == "turn_llm" and tl.text_excerpt == "Hello again #104" and tl.agent == "eva"

    # older versions stay readable
    assert len(msp.load_master_state(USER, at=1).episodic_memory) == 100
    assert len(msp.load_master_state(USER, at=2).episodic_memory) == 103
    assert msp.load_master_state(USER, at=0).episodic_memory == ()
    with pytest.raises(NotFound):
        msp.load_master_state(USER, at=4)


def test_get_session_buffer_has_the_seed_schema(tmp_path: Path) -> None:
    msp = MSP(tmp_path)
    sid = msp.create_sandbox(USER, "Sandbox 10:00")
    msp.write_episode(sid, seed_episode(1))
    msp.load_sandbox(sid).add_fact(content="User likes coffee", confidence=0.9)
    msp.update_state(sid, "ire_state", {"reflex_vector": {"a": 1}})
    msp.update_state(sid, "ire", {"gain": 2})
    msp.update_state(sid, "ehm", {"eva_matrix_9d": [1, 2, 3, 4, 5, 6, 7, 8, 9]})
    buf = msp.get_session_buffer(sid)
    assert isinstance(buf, SessionBuffer)
    raw = buf.model_dump(mode="json")
    for key in ("sandbox_id", "created_at", "parent_version", "new_episodes", "semantic_candidates",
                "state_deltas", "metadata"):
        assert key in raw, key
    assert raw["sandbox_id"] == sid and raw["parent_version"] == 0
    assert [e["episode_id"] for e in raw["new_episodes"]] == [raw["new_episodes"][0]["id"]]
    assert raw["new_episodes"][0]["episode_id"].startswith("ep_temp_")
    assert [(c["type"], c["content"], c["confidence"]) for c in raw["semantic_candidates"]] == [
        ("fact", "User likes coffee", 0.9)]
    assert raw["state_deltas"] == {"ire_state": {"reflex_vector": {"a": 1}, "gain": 2},
                                   "ehm_state": {"eva_matrix_9d": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}
    assert raw["metadata"]["turn_count"] == 2
    assert isinstance(raw["metadata"]["duration_seconds"], float) and raw["metadata"]["duration_seconds"] >= 0
    assert msp.load_session_buffer(sid) == buf


def test_write_to_session_buffer_seed_entry(tmp_path: Path) -> None:
    msp = MSP(tmp_path)
    sid = msp.create_sandbox(USER, "Sandbox 09:30")
    msp.write_to_session_buffer(sid, {
        "episode": {"episode_id": "uuid-1", "turn_1": {"speaker": "user", "text": "สวัสดี EVA"},
                    "turn_2": {"speaker": "eva", "text": "สวัสดีค่ะ"}, "RI_global": 0.9,
                    "rms_annotation": {"x": 1}},
        "state_updates": {"ire_state": {"reflex_vector": {"a": 1}}, "ehm_state": {"eva_matrix_9d": [0.1]}},
    })
    buf = msp.get_session_buffer(sid)
    assert len(buf.new_episodes) == 1 and buf.metadata["turn_count"] == 2
    assert set(buf.state_deltas) == {"ire_state", "ehm_state"}
    with pytest.raises(InvalidInput, match="bogus"):
        msp.write_to_session_buffer(sid, {"bogus": 1})
    master = msp.consolidate_session(sid)
    assert master.states == {"ire_state": {"reflex_vector": {"a": 1}}, "ehm_state": {"eva_matrix_9d": [0.1]}}
    assert [e["annotations"]["source_episode_id"] for e in master.episodic_memory] == ["uuid-1"]


def test_delete_sandbox_leaves_no_trace(tmp_path: Path) -> None:
    msp = MSP(tmp_path)
    s0 = msp.create_sandbox(USER, "first")
    msp.write_episode(s0, seed_episode(0))
    msp.consolidate_session(s0)
    acct_path = tmp_path / "accounts" / USER
    before = digest(acct_path, MASTER)
    sid = msp.create_sandbox(USER, "to be discarded")
    msp.write_episode(sid, seed_episode(1))
    msp.update_state(sid, "ire", {"a": 1})
    msp.load_sandbox(sid).propose_core("identity", "EVA", key="name", confidence=0.99, reason="r")
    assert (acct_path / "sandboxes" / sid).is_dir()
    msp.delete_sandbox(sid)
    assert digest(acct_path, MASTER) == before
    assert sorted(p.name for p in (acct_path / "sandboxes").iterdir()) == []
    with pytest.raises(NotFound):
        msp.get_session_buffer(sid)
    assert msp.get_master_version(USER) == 1
    assert len(msp.load_master_state(USER).episodic_memory) == 1
    assert msp.load_master_state(USER).states == {}


def test_apply_rules_then_merge_into_master(tmp_path: Path) -> None:
    msp = MSP(tmp_path)
    sid = msp.create_sandbox(USER, "s")
    msp.write_episode(sid, seed_episode(1))
    msp.update_state(sid, "ire", {"a": 1})
    msp.load_sandbox(sid).add_fact(content="User likes coffee", confidence=0.9)
    msp.load_sandbox(sid).add_fact(content="User likes tea", confidence=0.2)
    master = msp.load_master_state(USER)
    acct_path = tmp_path / "accounts" / USER
    before = digest(acct_path, MASTER)
    consolidated = msp.apply_consolidation_rules(msp.get_session_buffer(sid), master)
    assert digest(acct_path, MASTER) == before  # a pure plan
    assert len(consolidated.episodes) == 1 and consolidated.episodes[0].startswith("EP_")
    assert len(consolidated.knowledge) == 1
    assert consolidated.state_changes == [{"state": "ire", "keys": ["a"]}]
    merged = msp.merge_into_master(master, consolidated)
    assert merged.version == master.version + 1
    assert [e["id"] for e in merged.episodic_memory] == consolidated.episodes
    assert [f["id"] for f in merged.semantic_memory["facts"]] == consolidated.knowledge
    assert merged.states == {"ire_state": {"a": 1}}
    stale = msp.load_master_state(USER, at=0)
    sid2 = msp.create_sandbox(USER, "s2")
    with pytest.raises(Conflict):
        msp.apply_consolidation_rules(msp.get_session_buffer(sid2), stale)


def test_save_and_load_master_state(tmp_path: Path) -> None:
    msp = MSP(tmp_path)
    sid = msp.create_sandbox(USER, "s")
    msp.write_episode(sid, seed_episode(1))
    v1 = msp.consolidate_session(sid)
    edited = v1.model_copy(update={
        "states": {**v1.states, "rms_state": {"r": 5}},
        "core_memory": {"identity": {"name": "EVA"}, "values": ["care"], "worldview": {"time": "linear"}},
        "user_profile": {"name": "Freshair"},
    })
    v2 = msp.save_master_state(USER, edited)
    assert v2.version == 2 and msp.get_master_version(USER) == 2
    assert v2.states == {"rms_state": {"r": 5}}
    assert v2.core_memory == {"identity": {"name": "EVA"}, "values": ["care"], "worldview": {"time": "linear"}}
    assert v2.user_profile == {"name": "Freshair"}
    assert len(v2.episodic_memory) == 1  # not duplicated by the save
    again = msp.load_master_state(USER, at=1)
    assert again.states == {} and again.core_memory["identity"] == {} and again.version == 1
    with pytest.raises(Conflict):
        msp.save_master_state(USER, edited)  # based on v1, HEAD is v2
    # careful merge: a saved state cannot silently overwrite an existing core value
    v3 = msp.save_master_state(USER, v2.model_copy(update={
        "core_memory": {"identity": {"name": "BOB"}, "values": ["care"], "worldview": {}}}))
    assert v3.core_memory["identity"] == {"name": "EVA"}
    rejected = msp.engine.account(USER).log()[-1].rejected
    assert [r["value"] for r in rejected] == ["BOB"] and "preserved" in rejected[0]["why"]


# --- the engine: log, diff, show --at, rollback -------------------------------------------------


class History:
    """Five versions with records, supersession and every kind of document."""

    def __init__(self, root: Path) -> None:
        self.acct = acct = soulpass.open(root).account("alice", create=True)
        # v1: first session: episode + turns, a fact, core, profile, a state
        s = acct.create_sandbox("v1")
        tu = s.add_turn("user", "I live in Bangkok")
        s.write_episode({"summary": {"action_taken": "met"}, "turn_refs": [tu]})
        s.add_fact(content="User lives in Bangkok", confidence=0.9, source_refs=[tu])
        s.propose_core("identity", "EVA", key="name", confidence=0.95, reason="intro")
        s.update_profile({"name": "Ann"})
        s.update_state("ire", {"mood": "calm"})
        s.add_sensory("<html>bangkok</html>", source="https://example.org/bkk")
        self.v1 = self._archive(s)
        # v2: a contradiction supersedes the fact; state and profile change
        s = acct.create_sandbox("v2")
        s.add_fact(content="User lives in Paris", confidence=0.9)
        s.update_state("ire", {"mood": "excited"})
        s.update_profile({"city": "Paris"})
        self.v2 = self._archive(s)
        # v3: new records, a new state, a core value
        s = acct.create_sandbox("v3")
        s.write_episode({"summary": {"action_taken": "moved"}})
        s.add_fact(content="User likes croissants", confidence=0.9)
        s.update_state("ehm", {"matrix": [1, 2]})
        s.propose_core("values", "curiosity", confidence=0.95, reason="asks a lot")
        self.v3 = self._archive(s)
        # v4: another contradiction and more changes
        s = acct.create_sandbox("v4")
        s.add_fact(content="User lives in Rome", confidence=0.9)
        s.update_state("ire", {"mood": "tired"})
        s.add_turn("user", "Ciao")
        self.v4 = self._archive(s)

    def _archive(self, sb: soulpass.Sandbox) -> Committed:
        res = sb.archive()
        assert isinstance(res, Committed)
        return res

    def fact(self, obj: str) -> str:
        (fid,) = [f.id for f in self.acct.records("fact") if isinstance(f, SemanticFact) and f.object == obj]
        return fid


def triples(shown: Any) -> set[tuple[str, str, str]]:
    graph = shown.model_dump(mode="json")
    label = {n["id"]: n["label"].lower() for n in graph["nodes"]}
    return {(label[e["source"]], e["predicate"], label[e["target"]]) for e in graph["edges"]}


def content_at(acct: soulpass.Account, at: int) -> dict[str, Any]:
    """Everything visible at version ``at``, without the per-copy ``version`` stamp."""

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k != "version"}

    out: dict[str, Any] = {
        kind: {r.id: strip(r.model_dump(mode="json")) for r in acct.records(kind, at)} for kind in KINDS
    }
    out["core"] = strip(acct.show("core", at=at).model_dump(mode="json"))
    out["profile"] = strip(acct.show("profile", at=at).model_dump(mode="json"))
    out["states"] = {n: strip(b.model_dump(mode="json")) for n, b in acct.states(at).items()}
    graph = acct.show("gks", at=at).model_dump(mode="json")
    out["gks"] = {"nodes": sorted(map(repr, graph["nodes"])), "edges": sorted(map(repr, graph["edges"]))}
    return out


@pytest.fixture
def hist(tmp_path: Path) -> History:
    return History(tmp_path)


def test_log_has_one_entry_per_version(hist: History) -> None:
    log = hist.acct.log()
    assert [e.version for e in log] == [1, 2, 3, 4]
    assert [e.parent for e in log] == [0, 1, 2, 3]
    assert all(e.kind == "archive" and e.to_json()["rebased"] is None for e in log)
    assert log[1].superseded == [{"fact": hist.fact("Bangkok"), "by": hist.fact("Paris")}]
    assert hist.acct.head() == 4


def test_diff_lists_added_superseded_replaced(hist: History) -> None:
    acct = hist.acct
    d = acct.diff(1, 3)
    assert (d.from_version, d.to_version) == (1, 3)
    assert sorted(d.added["fact"]) == sorted([hist.fact("Paris"), hist.fact("croissants")])
    assert len(d.added["episode"]) == 1 and "turn_user" not in d.added
    assert d.superseded == [{"fact": hist.fact("Bangkok"), "by": hist.fact("Paris")}]
    assert "core/10_state/ire_state.json" in d.replaced
    assert "core/07_User_block/User_profile.json" in d.replaced
    assert "core/05_Core_Memory/Core_memory.json" in d.replaced
    assert d.retired == [] and d.rebases == []
    assert acct.diff(2, 2).added == {} and acct.diff(2, 2).superseded == []
    full = acct.diff(0, 4)
    assert sum(len(v) for v in full.added.values()) == sum(len(list(acct.records(k))) for k in KINDS)
    with pytest.raises(InvalidInput):
        acct.diff(3, 1)
    with pytest.raises(NotFound):
        acct.diff(0, 9)


def test_show_at_returns_content_as_of_that_version(hist: History) -> None:
    acct = hist.acct
    bkk = hist.fact("Bangkok")
    assert acct.show(bkk, at=1).superseded_by is None
    assert acct.show(bkk, at=2).superseded_by == hist.fact("Paris")
    assert acct.show(bkk).superseded_by == hist.fact("Paris")
    assert acct.show("state:ire", at=1).data == {"mood": "calm"}
    assert acct.show("state:ire", at=2).data == {"mood": "excited"}
    assert acct.show("state:ire", at=3).data == {"mood": "excited"}
    assert acct.show("state:ire").data == {"mood": "tired"}
    with pytest.raises(NotFound):
        acct.show("state:ehm", at=2)
    assert acct.show("state:ehm", at=3).data == {"matrix": [1, 2]}
    assert acct.show("profile", at=1).fields == {"name": "Ann"}
    assert acct.show("profile", at=2).fields == {"name": "Ann", "city": "Paris"}
    assert acct.show("core", at=1).identity == {"name": "EVA"} and acct.show("core", at=1).values == ()
    assert acct.show("core", at=3).values == ("curiosity",)
    assert acct.show("core", at=0).identity == {}
    assert triples(acct.show("gks", at=1)) == {("user", "lives in", "bangkok")}
    assert triples(acct.show("gks", at=2)) == {("user", "lives in", "paris")}
    assert triples(acct.show("gks", at=3)) == {("user", "lives in", "paris"), ("user", "likes", "croissants")}
    assert triples(acct.show("gks")) == {("user", "lives in", "rome"), ("user", "likes", "croissants")}
    assert acct.show("gks", at=0).edges == ()
    with pytest.raises(NotFound):
        acct.show(hist.fact("Rome"), at=3)  # did not exist yet
    with pytest.raises(NotFound):
        acct.show("core", at=5)


def test_show_gks_is_stable(hist: History) -> None:
    first, second = hist.acct.show("gks", at=2), hist.acct.show("gks", at=2)
    assert first == second


def test_rollback_creates_a_new_version_equal_to_the_target(hist: History) -> None:
    acct = hist.acct
    at1, at4 = content_at(acct, 1), content_at(acct, 4)
    rome, croissants = hist.fact("Rome"), hist.fact("croissants")
    n = acct.head()
    v = acct.rollback(1)
    assert v == n + 1 == acct.head()
    entry = acct.log()[-1]
    assert entry.kind == "rollback" and entry.rolled_back_to == 1 and entry.parent == n
    assert content_at(acct, v) == at1
    # records added after 1 are not visible now, but still readable at their versions
    with pytest.raises(NotFound):
        acct.record(rome)
    assert acct.record(rome, at=4).object == "Rome"
    assert acct.record(croissants, at=3).object == "croissants"
    assert acct.record(hist.fact("Bangkok")).superseded_by is None  # as it was at 1
    assert acct.state("ehm") is None and acct.state("ehm", at=3) is not None
    # earlier versions are unchanged by the rollback
    assert content_at(acct, 4) == at4
    # rolling back to N (before the rollback) restores everything
    w = acct.rollback(n)
    assert w == n + 2
    assert content_at(acct, w) == at4
    assert acct.record(rome).object == "Rome"
    assert content_at(acct, v) == at1  # and the rolled-back version still reads as it was


def test_rollback_then_archive_continues_ids(hist: History) -> None:
    acct = hist.acct
    rome, paris, croissants = hist.fact("Rome"), hist.fact("Paris"), hist.fact("croissants")
    acct.rollback(2)
    sb = acct.create_sandbox("after rollback")
    cid = sb.add_fact(content="User lives in Oslo", confidence=0.9)
    res = sb.archive()
    assert isinstance(res, Committed)
    new_id = res.plan.id_map[cid]
    assert new_id not in {rome, paris, croissants}
    assert acct.record(new_id).supersedes == (paris,)  # HEAD's graph is version 2's
    assert acct.record(rome, at=4).object == "Rome"  # the id was not reused


def test_diff_across_rollback_and_restore(hist: History) -> None:
    acct = hist.acct
    n = acct.head()
    rome = hist.fact("Rome")
    acct.rollback(1)
    w = acct.rollback(n)
    d = acct.diff(0, w)
    assert rome in d.added["fact"]
    assert d.retired == [] or all(acct.store.snapshot(w).document(p) is None for p in d.retired)


def test_rollback_to_bad_versions(hist: History) -> None:
    with pytest.raises(NotFound):
        hist.acct.rollback(99)
    with pytest.raises(NotFound):
        hist.acct.rollback(-1)
    assert hist.acct.head() == 4


def test_master_never_written_during_a_session(tmp_path: Path) -> None:
    hist = History(tmp_path)
    acct = hist.acct
    before = digest(acct.store.path, MASTER)
    head = acct.head()
    sandboxes = [acct.create_sandbox(f"session {i}") for i in range(3)]
    for i, sb in enumerate(sandboxes):
        for j in range(5):
            tu = sb.add_turn("user", f"message {i}.{j}")
            sb.add_turn("eva", f"reply {i}.{j}", reply_to=tu, confidence=0.8)
        sb.write_episode({"summary": {"action_taken": f"session {i}"}})
        sb.write_episode({"episode_id": f"seed-{i}", "turn_1": {"speaker": "user", "text": "x"}})
        sb.add_fact(content="User lives in Tokyo", confidence=0.9)
        sb.update_state("ire", {"mood": f"m{i}"})
        sb.update_state("qualia", {"q": i})
        sb.update_profile({"city": "Tokyo"})
        sb.propose_core("identity", "Tokyo", key="home", confidence=0.99, reason="moved")
        sb.add_sensory(f"page {i}", source="https://example.org")
        assert isinstance(sb.archive(dry_run=True), soulpass.Planned)
        sb.buffer()
    assert digest(acct.store.path, MASTER) == before
    assert acct.head() == head and len(acct.log()) == head
    sandboxes[1].discard()
    assert digest(acct.store.path, MASTER) == before
    res = sandboxes[0].archive()
    assert isinstance(res, Committed) and res.version == head + 1
    assert digest(acct.store.path, MASTER) != before


def test_diff_to_a_rollback_of_the_same_content_is_empty(hist: History) -> None:
    """diff(V, rollback-to-V) is a net diff: nothing added, retired or superseded in between."""
    acct = hist.acct
    v = acct.rollback(1)
    d = acct.diff(1, v)
    assert d.added == {} and d.retired == []
    assert d.superseded == []
    assert acct.diff(0, v).superseded == []
