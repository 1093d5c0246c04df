"""Record and document schemas: ids, semantic hash, episode id alignment, JSON schema, immutability.

The schemas follow the MSP spec v0.0.8 (seed ``001_…``): Episode V3, TurnUser, TurnLLM and SPO
facts, plus the common envelope of DESIGN §2.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

import soulpass
from soulpass import ids
from soulpass.errors import InvalidInput
from soulpass.records import (
    DOCUMENT_MODELS,
    RECORD_MODELS,
    CoreMemory,
    Episode,
    GKSEdge,
    GKSGraph,
    GKSNode,
    SemanticFact,
    SensoryRecord,
    SituationContext,
    StateBlob,
    StructuredSummary,
    TurnLLM,
    TurnUser,
    UserProfile,
    normalize_text,
    semantic_hash,
)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Durability is tested by the crash tests; fsync here would only slow the property test."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


# --- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "prefix"),
    [("episode", "EP"), ("turn_user", "TU"), ("turn_llm", "TL"), ("fact", "SF"), ("sensory", "SR")],
)
def test_permanent_id_format(kind: str, prefix: str) -> None:
    pid = ids.permanent_id(kind, "20260128", 1)
    assert pid == f"{prefix}_20260128_001"
    assert ids.is_permanent_id(pid) and not ids.is_temp_id(pid)
    assert ids.check_record_id(pid) == pid
    assert ids.record_date(pid) == ("2026", "01", "28")
    assert ids.permanent_id(kind, "20260128", 1234) == f"{prefix}_20260128_1234"
    assert ids.is_permanent_id(ids.permanent_id(kind, "20260128", 1234))


@pytest.mark.parametrize("kind", list(ids.PERMANENT_PREFIXES))
def test_temp_id_format(kind: str) -> None:
    tid = ids.new_temp_id(kind)
    assert re.fullmatch(rf"{ids.PERMANENT_PREFIXES[kind].lower()}_temp_[0-9a-f]{{12}}", tid)
    assert ids.is_temp_id(tid) and not ids.is_permanent_id(tid)
    assert ids.check_record_id(tid) == tid
    assert ids.new_temp_id(kind) != tid
    with pytest.raises(InvalidInput):
        ids.record_date(tid)  # temporary ids carry no date and have no path


@pytest.mark.parametrize(
    "bad",
    ["EP_2026_001", "ep_20260128_001", "XX_20260128_001", "EP_20260128_01", "EP_20260128_001x",
     "ep_temp_", "ep_temp_XYZXYZ", "ep_temp_abc", "tu-temp-abcdef", "EP_20260128_001/../x", "SF_20260128_"],
)
def test_malformed_record_ids_refused(bad: str) -> None:
    assert not ids.is_permanent_id(bad) and not ids.is_temp_id(bad)
    with pytest.raises(InvalidInput):
        ids.check_record_id(bad)


def test_sandbox_id_is_a_safe_unique_name() -> None:
    when = datetime(2026, 1, 28, 9, 30, tzinfo=UTC)
    a, b = ids.new_sandbox_id(when), ids.new_sandbox_id(when)
    assert a != b
    assert a.startswith("sb_20260128_093000_")
    assert ids.check_name(a, "sandbox id") == a


@pytest.mark.parametrize("good", ["alice", "User01", "a.b-c_d", "9lives", "x" * 128])
def test_check_name_accepts_plain_names(good: str) -> None:
    assert ids.check_name(good) == good


def test_record_date_rejects_impossible_dates() -> None:
    # Month 13 cannot be a record date; it would shard into core/.../2026/13/.
    with pytest.raises(InvalidInput, match="neither a permanent id"):
        ids.check_record_id("EP_20261301_001")


# --- semantic hash ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    ["User likes coffee", "user likes coffee", "USER LIKES COFFEE", "User likes coffee.", "User, likes coffee!",
     "  User   likes\tcoffee\n", "User likes... coffee?!", "'User' likes \"coffee\""],
)
def test_semantic_hash_normalises_case_punctuation_whitespace(variant: str) -> None:
    assert normalize_text(variant) == "user likes coffee"
    assert semantic_hash(variant) == semantic_hash("user likes coffee")


def test_semantic_hash_distinguishes_content() -> None:
    h = semantic_hash("User likes coffee")
    assert re.fullmatch(r"[0-9a-f]{64}", h)
    assert semantic_hash("User likes tea") != h
    assert semantic_hash("User likescoffee") != h  # words are not glued together
    assert semantic_hash("Über mag Kaffee") == semantic_hash("über MAG kaffee")


def test_record_hash_is_filled_from_core_text() -> None:
    turn = TurnUser(id=ids.new_temp_id("turn_user"), text_excerpt="Hello, EVA!")
    assert turn.semantic_hash == semantic_hash("hello eva") and turn.text == "Hello, EVA!"
    ep = Episode(summary=StructuredSummary(action_taken="Chose", key_outcome="Inter font"),
                 id=ids.new_temp_id("episode"))
    assert ep.semantic_hash == semantic_hash("chose inter font")


def test_fact_hash_is_over_spo_whatever_the_text() -> None:
    a = SemanticFact(id="SF_20260128_001", subject="User", predicate="likes", object="Coffee", confidence=0.9,
                     text="the user said they like coffee a lot")
    b = SemanticFact(id="SF_20260128_002", subject="user", predicate="LIKES", object="coffee.", confidence=0.8)
    assert a.semantic_hash == b.semantic_hash == semantic_hash("user likes coffee")


# --- episode id alignment -------------------------------------------------------------------


def test_episode_id_and_id_are_aligned() -> None:
    assert Episode(id="EP_20260128_001").episode_id == "EP_20260128_001"
    assert Episode(episode_id="EP_20260128_002").id == "EP_20260128_002"
    both = Episode(id="EP_20260128_003", episode_id="EP_20260128_003")
    assert both.id == both.episode_id == "EP_20260128_003"


def test_episode_id_mismatch_is_an_error() -> None:
    with pytest.raises(ValidationError, match="EP_20260128_002"):
        Episode(id="EP_20260128_001", episode_id="EP_20260128_002")


def test_episode_id_mismatch_through_a_sandbox_is_invalid_input(tmp_path: Path) -> None:
    sb = soulpass.open(tmp_path).account("a", create=True).create_sandbox("s")
    with pytest.raises(InvalidInput, match="episode_id"):
        sb.write_episode({"id": "ep_temp_aaaaaa", "episode_id": "ep_temp_bbbbbb"})
    assert sb.buffer().new_episodes == ()


def test_committed_episode_keeps_ids_aligned(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path).account("a", create=True)
    sb = acct.create_sandbox("s")
    eid = sb.write_episode({"summary": {"action_taken": "a"}})
    res = sb.archive()
    ep = acct.record(res.plan.id_map[eid])
    assert isinstance(ep, Episode)
    assert ep.id == ep.episode_id and ids.is_permanent_id(ep.id) and ep.version == 1


# --- JSON schema ------------------------------------------------------------------------------


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/$defs/"), ref
        node = schema["$defs"][ref.split("/")[-1]]
    return node


def _all_refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in _all_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _all_refs(v)]
    return []


def _props(model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = model.model_json_schema()
    return schema, schema["properties"]


ALL_MODELS = {**RECORD_MODELS, **DOCUMENT_MODELS}


@pytest.mark.parametrize("name", list(ALL_MODELS))
def test_json_schema_is_valid(name: str) -> None:
    model = ALL_MODELS[name]
    schema = model.model_json_schema()
    json.loads(json.dumps(schema))  # plain JSON
    assert schema["type"] == "object" and schema["title"] == model.__name__
    assert schema.get("additionalProperties") is False  # extra fields are forbidden
    assert set(schema.get("required", [])) <= set(schema["properties"])
    assert set(schema["properties"]) == set(model.model_fields)
    for ref in _all_refs(schema):  # every $ref resolves inside the document
        assert ref.startswith("#/$defs/") and ref.split("/")[-1] in schema["$defs"], ref
    for field in ("kind", "version", "schema_version"):
        assert field in schema["properties"]
    if name in RECORD_MODELS:
        for field in ("id", "created_at", "session_id", "agent", "tags", "text", "semantic_hash"):
            assert field in schema["properties"], field
        kind = _resolve(schema, schema["properties"]["kind"])
        assert kind.get("const", kind.get("enum", [None])[0]) == name


def test_episode_schema_has_spec_fields() -> None:
    schema, props = _props(Episode)
    for field in ("episode_id", "turn_refs", "persona_id", "event_id", "situation_context", "summary",
                  "RI_global", "encoding_level"):
        assert field in props, field
    assert props["turn_refs"]["type"] == "array" and props["turn_refs"]["items"]["type"] == "string"
    situation = _resolve(schema, props["situation_context"])
    assert set(situation["properties"]) == {"interaction_mode", "location_context", "agent_role", "mission_goal"}
    summary = _resolve(schema, props["summary"])
    assert set(summary["properties"]) == {"action_taken", "key_outcome", "future_implication"}


def test_turn_schemas_have_spec_fields() -> None:
    _, user = _props(TurnUser)
    for field in ("text_excerpt", "emotion_signal", "salience_anchor", "intent"):
        assert field in user, field
    assert "text_excerpt" in TurnUser.model_json_schema()["required"]
    schema, llm = _props(TurnLLM)
    assert "text_excerpt" in llm
    assert set(_resolve(schema, llm["epistemic_mode"])["enum"]) == {"assert", "reflect", "hypothesize", "caution"}
    conf = llm["confidence"]
    assert conf["minimum"] == 0.0 and conf["maximum"] == 1.0


def test_fact_schema_has_spec_fields() -> None:
    schema, props = _props(SemanticFact)
    for field in ("subject", "predicate", "object", "confidence", "valid_from_version", "superseded_by",
                  "valid_to_version", "supersedes", "source_refs"):
        assert field in props, field
    assert {"subject", "predicate", "object", "confidence"} <= set(schema["required"])
    assert props["confidence"]["minimum"] == 0.0 and props["confidence"]["maximum"] == 1.0


@pytest.mark.parametrize("value", [-0.01, 1.01, float("nan")])
def test_confidence_bounds_enforced(value: float) -> None:
    with pytest.raises(ValidationError, match="confidence"):
        TurnLLM(id="tl_temp_abcdef", text_excerpt="x", confidence=value)
    with pytest.raises(ValidationError, match="confidence"):
        SemanticFact(id="SF_20260128_001", subject="a", predicate="b", object="c", confidence=value)


def test_epistemic_mode_enum_enforced() -> None:
    for mode in ("assert", "reflect", "hypothesize", "caution"):
        assert TurnLLM(id="tl_temp_abcdef", text_excerpt="x", epistemic_mode=mode).epistemic_mode == mode
    with pytest.raises(ValidationError, match="epistemic_mode"):
        TurnLLM(id="tl_temp_abcdef", text_excerpt="x", epistemic_mode="guess")


# --- frozen and round-trip --------------------------------------------------------------------

WHEN = datetime(2026, 1, 28, 9, 30, 15, 123456, tzinfo=UTC)


def sample_models() -> dict[str, BaseModel]:
    return {
        "episode": Episode(
            id="EP_20260128_001", version=3, created_at=WHEN, session_id="sb_1", agent="eva", tags=("work",),
            turn_refs=("TU_20260128_001", "TL_20260128_001"), persona_id="EVA_01", event_id="resume_trip",
            situation_context=SituationContext(interaction_mode="casual", location_context="mobile_ssh",
                                               agent_role="Senior Dev", mission_goal="Refactor MSP"),
            summary=StructuredSummary(action_taken="Proposed File-per-Record", key_outcome="User approved",
                                      future_implication="Redesign episodic.py"),
            RI_global=0.85, encoding_level="L2_standard", annotations={"rms_annotation": {"arousal": 0.3}},
        ),
        "turn_user": TurnUser(id="TU_20260128_001", version=3, created_at=WHEN, text_excerpt="สวัสดี EVA 👋",
                              emotion_signal="joy", salience_anchor=("sushi", "Python"), intent="greet",
                              episode_ref="EP_20260128_001"),
        "turn_llm": TurnLLM(id="TL_20260128_001", version=3, created_at=WHEN, agent="eva", text_excerpt="Hi!",
                            epistemic_mode="caution", confidence=0.42, reply_to="TU_20260128_001"),
        "fact": SemanticFact(id="SF_20260128_001", version=4, created_at=WHEN, subject="User (Freshair)",
                             predicate="likes", object="Sushi", confidence=0.95, source_refs=("TU_20260128_001",),
                             valid_from_version=3, superseded_by="SF_20260128_002", valid_to_version=4,
                             supersedes=("SF_20250101_009",)),
        "sensory": SensoryRecord(id="SR_20260128_001", version=3, created_at=WHEN, content="<html>page</html>",
                                 source="https://example.org/x", media_type="text/html"),
        "core_memory": CoreMemory(version=2, updated_at=WHEN, identity={"name": "EVA"}, values=("care",),
                                  worldview={"time": "linear"}),
        "user_profile": UserProfile(version=2, updated_at=WHEN, fields={"name": "Ann", "age": 30},
                                    key_times={"name": WHEN}),
        "state": StateBlob(version=2, updated_at=WHEN, name="ire", data={"reflex_vector": {"a": [1, 2.5]}},
                           key_times={"reflex_vector": WHEN}),
        "gks": GKSGraph(version=2, updated_at=WHEN, nodes=(GKSNode(id="N_1", label="User", fact_refs=("SF_1",)),),
                        edges=(GKSEdge(source="N_1", target="N_2", predicate="likes", fact_refs=("SF_1",)),)),
    }


@pytest.mark.parametrize("name", list(sample_models()))
def test_models_round_trip_through_json_unchanged(name: str) -> None:
    model = sample_models()[name]
    cls = type(model)
    assert cls.model_validate_json(model.model_dump_json()) == model
    via_python_json = json.loads(json.dumps(model.model_dump(mode="json"), ensure_ascii=False))
    again = cls.model_validate(via_python_json)
    assert again == model
    assert again.model_dump(mode="json") == via_python_json  # stable: a second trip changes nothing


@pytest.mark.parametrize("name", list(sample_models()))
def test_models_are_frozen(name: str) -> None:
    model = sample_models()[name]
    field = "version"
    with pytest.raises(ValidationError, match="frozen"):
        setattr(model, field, 99)
    assert getattr(model, field) != 99


def test_nested_parts_are_frozen_too() -> None:
    ep = sample_models()["episode"]
    assert isinstance(ep, Episode)
    with pytest.raises(ValidationError):
        ep.summary.key_outcome = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ep.situation_context.location_context = "local_dev"  # type: ignore[misc]
    with pytest.raises((TypeError, AttributeError)):
        cast(Any, ep.turn_refs).append("TU_20260128_009")  # a tuple: no append
    assert ep.summary.key_outcome == "User approved"


def test_unknown_fields_refused_by_every_model() -> None:
    for model in sample_models().values():
        data = model.model_dump(mode="json") | {"unexpected": 1}
        with pytest.raises(ValidationError, match="unexpected"):
            type(model).model_validate(data)


def test_times_are_utc() -> None:
    naive = TurnUser(id="tu_temp_abcdef", text_excerpt="x", created_at=datetime(2026, 1, 28, 9, 0))
    assert naive.created_at.tzinfo is not None and naive.created_at.utcoffset() == timedelta(0)
    bangkok = timezone(timedelta(hours=7))
    local = TurnUser(id="tu_temp_abcdef", text_excerpt="x", created_at=datetime(2026, 1, 28, 16, 0, tzinfo=bangkok))
    assert local.created_at == datetime(2026, 1, 28, 9, 0, tzinfo=UTC)
    assert local.created_at.utcoffset() == timedelta(0)


def test_sensory_content_hash_and_size() -> None:
    rec = SensoryRecord(id="sr_temp_abcdef", content="héllo")
    assert rec.size_bytes == len("héllo".encode()) == 6
    assert rec.content_sha256 == hashlib.sha256("héllo".encode()).hexdigest()


# --- property: nothing is silently mangled ----------------------------------------------------

TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200)


@pytest.fixture(scope="module")
def prop_account(tmp_path_factory: pytest.TempPathFactory) -> soulpass.Account:
    return soulpass.open(tmp_path_factory.mktemp("prop")).account("prop", create=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(user_text=TEXT, llm_text=TEXT, outcome=TEXT)
def test_any_text_round_trips_through_a_sandbox(
    prop_account: soulpass.Account, user_text: str, llm_text: str, outcome: str
) -> None:
    acct = prop_account
    sb = acct.create_sandbox("property")
    tu = sb.add_turn("user", user_text)
    tl = sb.add_turn("eva", llm_text, reply_to=tu)
    ep = sb.write_episode({"summary": {"key_outcome": outcome}, "turn_refs": [tu, tl]})
    res = sb.archive()
    assert isinstance(res, soulpass.Committed)
    m = res.plan.id_map
    u, llm, e = acct.record(m[tu]), acct.record(m[tl]), acct.record(m[ep])
    assert isinstance(u, TurnUser) and isinstance(llm, TurnLLM) and isinstance(e, Episode)
    assert u.text_excerpt == user_text
    assert llm.text_excerpt == llm_text and llm.reply_to == m[tu]
    assert e.summary.key_outcome == outcome
    assert e.turn_refs == (m[tu], m[tl])
    # and the same again at that exact version, read through the snapshot path
    assert acct.show(m[tu], at=res.version).text_excerpt == user_text
