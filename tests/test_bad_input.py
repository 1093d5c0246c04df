"""Hostile and malformed input: a clear ``InvalidInput``, nothing stored, the store still opens.

Acceptance: hostile account/sandbox/record ids, invalid UTF-8, over-size text (limit
configurable) and schema violations are refused with an ``InvalidInput`` (a ``SoulpassError``)
whose message names what was wrong; the session buffer, the master files and HEAD are exactly as
before (the whole account tree is hashed before and after); the account still opens and the live
sandbox still archives, containing only what was written before the refused call.

Every case is a plain assertion: there is no known-bug escape hatch.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import soulpass
from files_helpers import buffer_file
from soulpass import Committed, InvalidInput, Limits, SoulpassError

LIMIT = 1000
# Message bodies (turn text, sensory content, journal text) have a limit of their own; here both
# limits are LIMIT, so every over-size case below is refused at the same size.
LIMITS = Limits(max_text_chars=LIMIT, max_body_chars=LIMIT)
ACCOUNT = "alice"
BAD = "bad \udcff text"  # a lone surrogate: not encodable as UTF-8
# A file name that is not UTF-8 on disk, as Python hands it over (PEP 383 surrogateescape).
FS_PATH = b"/srv/inbox/\xff\xfe.txt".decode("utf-8", "surrogateescape")

HOSTILE_NAMES: list[Any] = [
    "..",
    ".",
    "a/b",
    "a\\b",
    "../../etc",
    "x\x00y",
    "tab\tname",
    "\n",
    "",
    "a" * 129,
    "é",
    " leading-space",
    123,
    None,
]


def _id(value: Any) -> str:
    return ascii(value)[:24]


# --- the environment and its invariants -----------------------------------------------------


@dataclass
class Env:
    home: Path
    sp: soulpass.Soulpass
    acct: soulpass.Account
    sb: soulpass.Sandbox
    fact_id: str
    episode_id: str
    live_turn_text: str = "written before the bad call"


def tree_digest(root: Path) -> str:
    """Hash of every directory name, file name and file content under ``root`` (lock files aside)."""
    h = hashlib.sha256()
    if not root.exists():
        return "absent"
    for p in sorted(root.rglob("*")):
        if p.name.endswith(".lock"):
            continue  # advisory lock files are empty and carry no content
        rel = os.fsencode(p.relative_to(root).as_posix())
        if p.is_dir():
            h.update(b"D " + rel + b"\0")
        else:
            h.update(b"F " + rel + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def buffer_lines(env: Env) -> int:
    return len(buffer_file(env.sb).read_bytes().splitlines())


def observed(env: Env) -> tuple[str, int, int, int]:
    return tree_digest(env.home), buffer_lines(env), env.acct.head(), len(env.acct.log())


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Durability is tested by the crash tests; here fsync would only make hundreds of cases slow."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An account at version 1 plus a live sandbox holding one turn, built once and copied per test."""
    home = tmp_path_factory.mktemp("template") / "home"
    sp = soulpass.open(home, limits=LIMITS)
    acct = sp.account(ACCOUNT, create=True)
    seed = acct.create_sandbox("seed session")
    tu = seed.add_turn("user", "I live in Bangkok")
    ep = seed.write_episode({"summary": {"action_taken": "talked"}, "turn_refs": [tu]})
    fact = seed.add_fact("User", "lives in", "Bangkok", confidence=0.9)
    seed.update_state("ire", {"mood": "calm"})
    seed.propose_core("identity", "EVA", key="name", confidence=0.95, reason="introduced herself")
    res = seed.archive()
    assert isinstance(res, Committed) and res.version == 1
    sb = acct.create_sandbox("live session")
    sb.add_turn("user", Env.live_turn_text)
    return {"home": home, "sandbox": sb.id, "fact": res.plan.id_map[fact], "episode": res.plan.id_map[ep]}


@pytest.fixture
def env(tmp_path: Path, template: dict[str, Any]) -> Env:
    home = tmp_path / "home"
    shutil.copytree(template["home"], home)
    sp = soulpass.open(home, limits=LIMITS)
    acct = sp.account(ACCOUNT)
    e = Env(home, sp, acct, acct.sandbox(template["sandbox"]), template["fact"], template["episode"])
    assert acct.head() == 1 and buffer_lines(e) == 1
    return e


def assert_healthy(env: Env) -> None:
    """Reopen from disk: HEAD unchanged, the live sandbox archives with only its earlier turn."""
    sp = soulpass.open(env.home, limits=LIMITS)
    acct = sp.account(ACCOUNT)
    assert acct.head() == 1
    assert [s.sandbox_id for s in acct.sandboxes()] == [env.sb.id], "a refused call left a sandbox behind"
    res = acct.sandbox(env.sb.id).archive()
    assert isinstance(res, Committed) and res.version == 2
    assert list(res.plan.added) == ["turn_user"] and len(res.plan.added["turn_user"]) == 1
    assert res.plan.conflicts == [] and res.plan.rejected == [] and res.plan.state_changes == []
    new_turns = [t.text_excerpt for t in acct.records("turn_user") if t.version == 2]
    assert new_turns == [env.live_turn_text]
    assert acct.record(env.fact_id).object == "Bangkok"
    assert acct.core_memory().identity == {"name": "EVA"}
    assert acct.state("ire").data == {"mood": "calm"}


def expect_refused(
    env: Env, action: Callable[[], Any], *needles: str | tuple[str, ...]
) -> InvalidInput:
    """Run ``action``; it must raise InvalidInput naming ``needles`` and change nothing on disk."""
    before = observed(env)
    try:
        action()
    except InvalidInput as exc:
        err = exc
    except Exception as exc:  # any other type is a leak
        pytest.fail(f"leaked {type(exc).__module__}.{type(exc).__name__} instead of InvalidInput: {exc!r}")
    else:
        pytest.fail("accepted; expected InvalidInput")
    assert isinstance(err, SoulpassError)
    assert not isinstance(err, ValidationError | UnicodeError | OSError | ValueError)
    msg = str(err)
    msg.encode("utf-8")  # the message itself must be printable/loggable (no raw lone surrogates)
    low = msg.lower()
    for needle in needles:  # a needle is a word, or a tuple of words any one of which will do
        options = (needle,) if isinstance(needle, str) else needle
        named = any(o.lower() in low for o in options)
        assert named, f"message {msg!r} does not name {needle!r}"
    after = observed(env)
    assert after[1] == before[1], "the session buffer gained lines"
    assert after[2:] == before[2:], "HEAD or the version log changed"
    assert after[0] == before[0], "files under the home folder changed"
    assert_healthy(env)
    return err


# --- hostile names --------------------------------------------------------------------------

# op -> (action(env, name), words the message must contain)
NAME_OPS: dict[str, tuple[Callable[[Env, Any], Any], str | tuple[str, ...]]] = {
    "account.create": (lambda e, n: e.sp.account(n, create=True), "account name"),
    "account.open": (lambda e, n: e.sp.account(n), "account name"),
    "create_sandbox": (lambda e, n: e.acct.create_sandbox("n", sandbox_id=n), "sandbox id"),
    "acct.sandbox": (lambda e, n: e.acct.sandbox(n), "sandbox id"),
    "find_sandbox": (lambda e, n: e.sp.find_sandbox(n), "sandbox id"),
    "acct.archive": (lambda e, n: e.acct.archive(n), "sandbox id"),
    "acct.discard": (lambda e, n: e.acct.discard(n), "sandbox id"),
    "acct.record": (lambda e, n: e.acct.record(n), "record id"),
    "acct.show": (lambda e, n: e.acct.show(n), ("record id", "ref")),
    "acct.state": (lambda e, n: e.acct.state(n), "state name"),
    "update_state": (lambda e, n: e.sb.update_state(n, {"k": 1}), "name"),
    "episode id": (lambda e, n: e.sb.write_episode({"id": n, "summary": {"action_taken": "x"}}), "id"),
    "temp episode_id": (
        lambda e, n: e.sb.write_episode({"episode_id": f"ep_temp_{n}", "summary": {"action_taken": "x"}}),
        "id",
    ),
    "turn_refs": (lambda e, n: e.sb.write_episode({"turn_refs": [n], "summary": {"action_taken": "x"}}), "turn_ref"),
    "seed turn_refs": (
        lambda e, n: e.sb.write_episode(
            {"episode_id": "ep_001", "turn_1": {"speaker": "user", "text": "hi"}, "turn_refs": [n]}
        ),
        "turn_ref",
    ),
    "turn id": (lambda e, n: e.sb.write_turn({"kind": "turn_user", "text_excerpt": "x", "id": n}), "id"),
}


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=_id)
@pytest.mark.parametrize("op", list(NAME_OPS))
def test_hostile_name_refused(env: Env, op: str, name: Any) -> None:
    if op == "create_sandbox" and name is None:
        pytest.skip("sandbox_id=None is the documented 'generate one' default")
    action, field = NAME_OPS[op]
    expect_refused(env, lambda: action(env, name), field)


@pytest.mark.parametrize("name", [n for n in HOSTILE_NAMES if isinstance(n, str) and n], ids=_id)
def test_hostile_state_ref_in_show(env: Env, name: str) -> None:
    expect_refused(env, lambda: env.acct.show(f"state:{name}"), "state name")


@pytest.mark.parametrize("name", ["..", "a/b", "../../etc", "x\x00y", "a" * 129], ids=_id)
def test_hostile_sandbox_id_never_becomes_a_path(env: Env, name: str) -> None:
    """Nothing is created outside the home folder (or anywhere) for a hostile sandbox id."""
    outside = env.home.parent
    before = tree_digest(outside)
    with pytest.raises(InvalidInput):
        env.acct.create_sandbox("n", sandbox_id=name)
    assert tree_digest(outside) == before


@pytest.mark.parametrize("name", ["..", "a/b", "x\x00y", "a" * 129, "é"], ids=_id)
def test_foreign_seed_episode_id_is_data_not_a_path(env: Env, name: str) -> None:
    """A seed dict's own ``episode_id`` (not one of ours) is never used as an id or a path.

    It is kept verbatim under ``annotations.source_episode_id`` and the episode gets a permanent
    ``EP_`` id; the files written are exactly the expected record files.
    """
    eid = env.sb.write_episode({"episode_id": name, "turn_1": {"speaker": "user", "text": "hi"}})
    assert eid.startswith("ep_temp_")
    res = env.sb.archive()
    assert isinstance(res, Committed)
    new_id = res.plan.id_map[eid]
    assert new_id.startswith("EP_")
    ep = env.acct.record(new_id)
    assert ep.annotations["source_episode_id"] == name
    assert ep.episode_id == new_id
    root = env.acct.store.path
    for p in env.home.rglob("*"):
        assert name not in p.relative_to(env.home).parts
    record_file = re.compile(
        r"^core/(VERSION\.json|01_Episodic_memory/(episodes|turns/user|turns/llm)/\d{4}/\d{2}/(EP|TU|TL)_\d{8}_\d{3,}\.json"
        r"|02_Semantic_memory/facts/\d{4}/\d{2}/SF_\d{8}_\d{3,}\.json|05_Core_Memory/Core_memory\.json"
        r"|09_Genesis_Knowledge_System/.+\.json|10_state/[a-z]+_state\.json)$"
    )
    stray = [p.relative_to(root).as_posix() for p in (root / "core").rglob("*") if p.is_file()]
    assert [p for p in stray if not record_file.match(p)] == []


@pytest.mark.parametrize("name", ["../../etc", "a/b", "x\x00y"], ids=_id)
@pytest.mark.parametrize("where", ["fact source_refs", "turn reply_to", "turn episode_ref"])
def test_hostile_crosslink_ids_refused(env: Env, where: str, name: str) -> None:
    """Crosslinks are record ids like turn_refs; they must be validated the same way."""
    actions: dict[str, Callable[[], Any]] = {
        "fact source_refs": lambda: env.sb.add_fact("User", "likes", "tea", confidence=0.9, source_refs=[name]),
        "turn reply_to": lambda: env.sb.add_turn("eva", "hi", reply_to=name),
        "turn episode_ref": lambda: env.sb.add_turn("user", "hi", episode_ref=name),
    }
    needle = {"fact source_refs": "source_ref", "turn reply_to": "reply", "turn episode_ref": "episode_ref"}[where]
    expect_refused(env, actions[where], needle)


# --- invalid UTF-8 --------------------------------------------------------------------------

UTF8_CASES: dict[str, Callable[[Env], Any]] = {
    "user turn text": lambda e: e.sb.add_turn("user", BAD),
    "llm turn text": lambda e: e.sb.add_turn("eva", BAD, epistemic_mode="reflect"),
    "turn emotion_signal": lambda e: e.sb.add_turn("user", "ok", emotion_signal=BAD),
    "turn tags": lambda e: e.sb.write_turn({"kind": "turn_user", "text_excerpt": "ok", "tags": [BAD]}),
    "episode summary": lambda e: e.sb.write_episode({"summary": {"action_taken": BAD}}),
    "episode situation_context":
        lambda e: e.sb.write_episode({"summary": {"action_taken": "a"}, "situation_context": {"mission_goal": BAD}}),
    "seed episode turn text":
        lambda e: e.sb.write_episode({"episode_id": "ep_001", "turn_1": {"speaker": "user", "text": BAD}}),
    "seed episode rms_annotation": lambda e: e.sb.write_episode(
            {"episode_id": "ep_001", "turn_1": {"speaker": "user", "text": "ok"}, "rms_annotation": {"x": BAD}}
        ),
    "fact object": lambda e: e.sb.add_fact("User", "likes", BAD, confidence=0.9),
    "fact subject": lambda e: e.sb.add_fact(BAD, "likes", "tea", confidence=0.9),
    "fact content": lambda e: e.sb.add_fact(content=BAD, confidence=0.9),
    "state value": lambda e: e.sb.update_state("ire", {"mood": BAD}),
    "nested state value": lambda e: e.sb.update_state("ire", {"deep": [{"x": BAD}]}),
    "state key": lambda e: e.sb.update_state("ire", {BAD: 1}),
    "profile value": lambda e: e.sb.update_profile({"name": BAD}),
    "profile key": lambda e: e.sb.update_profile({BAD: "x"}),
    "core value": lambda e: e.sb.propose_core("identity", BAD, key="mood", confidence=0.95, reason="r"),
    "core reason": lambda e: e.sb.propose_core("identity", "x", key="mood", confidence=0.95, reason=BAD),
    "sensory content": lambda e: e.sb.add_sensory(BAD),
    "sensory source from a non-UTF-8 file name": lambda e: e.sb.add_sensory("page text", source=FS_PATH),
    "sensory content = non-UTF-8 file name": lambda e: e.sb.add_sensory(f"see {FS_PATH}"),
    "turn text = non-UTF-8 file name": lambda e: e.sb.add_turn("user", f"open {FS_PATH}"),
}


@pytest.mark.parametrize("case", list(UTF8_CASES))
def test_invalid_utf8_refused(env: Env, case: str) -> None:
    action = UTF8_CASES[case]
    err = expect_refused(env, lambda: action(env))
    msg = str(err).lower()
    assert "utf-8" in msg or "unicode" in msg, f"message does not say what was wrong: {err}"


def test_surrogateescape_path_really_is_invalid() -> None:
    # Guard for the cases above: the path must not be encodable, or they would test nothing.
    with pytest.raises(UnicodeEncodeError):
        FS_PATH.encode("utf-8")
    assert FS_PATH.encode("utf-8", "surrogateescape") == b"/srv/inbox/\xff\xfe.txt"


def test_invalid_utf8_sandbox_label_leaves_nothing(env: Env) -> None:
    expect_refused(env, lambda: env.acct.create_sandbox(f"label {BAD}"), "utf-8")


# --- over-size text -------------------------------------------------------------------------

OVER = "x" * (LIMIT + 1)
EXACT = "y" * LIMIT

OVERSIZE_CASES: dict[str, tuple[Callable[[Env], Any], tuple[str, ...]]] = {
    "user turn text": (lambda e: e.sb.add_turn("user", OVER), ("text",)),
    "llm turn text": (lambda e: e.sb.add_turn("eva", OVER), ("text",)),
    "fact object": (lambda e: e.sb.add_fact("User", "likes", OVER, confidence=0.9), ("object",)),
    "fact content": (lambda e: e.sb.add_fact(content="User likes " + OVER[11:], confidence=0.9), ("content",)),
    "state value": (lambda e: e.sb.update_state("ire", {"mood": OVER}), ("mood",)),
    "nested state value": (lambda e: e.sb.update_state("ire", {"m": [{"deep": OVER}]}), ("deep",)),
    "profile value": (lambda e: e.sb.update_profile({"bio": OVER}), ("bio",)),
    "core value": (lambda e: e.sb.propose_core("worldview", OVER, key="view", confidence=0.95, reason="r"), ("value",)),
    "episode summary field": (lambda e: e.sb.write_episode({"summary": {"action_taken": OVER}}), ("action_taken",)),
    "sensory content": (lambda e: e.sb.add_sensory(OVER), ("content",)),
    "seed turn_2 text": (lambda e: e.sb.write_episode(
            {"episode_id": "ep_001", "turn_1": {"speaker": "user", "text": "short"},
             "turn_2": {"speaker": "eva", "text": OVER}}
        ), ("text",)),
}


@pytest.mark.parametrize("case", list(OVERSIZE_CASES))
def test_oversize_text_refused_naming_the_field(env: Env, case: str) -> None:
    action, fields = OVERSIZE_CASES[case]
    err = expect_refused(env, lambda: action(env), *fields)
    assert str(LIMIT + 1) in str(err) and str(LIMIT) in str(err)


EXACT_CASES: dict[str, Callable[[Env], Any]] = {
    "user turn text": lambda e: e.sb.add_turn("user", EXACT),
    "fact object": lambda e: e.sb.add_fact("User", "likes", EXACT, confidence=0.9),
    "state value": lambda e: e.sb.update_state("ire", {"mood": EXACT}),
    "sensory content": lambda e: e.sb.add_sensory(EXACT),
    "episode with three full summary fields": lambda e: e.sb.write_episode(
            {"summary": {"action_taken": EXACT, "key_outcome": EXACT, "future_implication": EXACT}}
        ),
    "seed episode with two full turns": lambda e: e.sb.write_episode(
            {"episode_id": "ep_001", "turn_1": {"speaker": "user", "text": EXACT},
             "turn_2": {"speaker": "eva", "text": EXACT}}
        ),
}


@pytest.mark.parametrize("case", list(EXACT_CASES))
def test_text_at_the_limit_is_accepted_and_stored_whole(env: Env, case: str) -> None:
    EXACT_CASES[case](env)
    res = env.sb.archive()
    assert isinstance(res, Committed)
    stored = [
        r.model_dump(mode="json")
        for kind in ("turn_user", "turn_llm", "fact", "sensory", "episode")
        for r in env.acct.records(kind)
        if r.version == res.version
    ]
    state = env.acct.state("ire")
    assert state is not None
    blob = repr(stored) + repr(state.data)
    assert EXACT in blob, "the text at the limit was not stored whole"


def test_limit_is_configurable(tmp_path: Path) -> None:
    text = "z" * 1500
    default = soulpass.open(tmp_path / "a").account("u", create=True).create_sandbox("s")
    default.add_turn("user", text)  # the default limit (8 Mi characters for a message body) lets it through
    small = soulpass.open(tmp_path / "b", limits=Limits(max_text_chars=100, max_body_chars=100)).account(
        "u", create=True)
    sb = small.create_sandbox("s")
    sb.add_turn("user", "z" * 100)
    with pytest.raises(InvalidInput, match="101 characters long"):
        sb.add_turn("user", "z" * 101)
    assert len(sb.buffer().new_turns) == 1


def test_small_limit_applies_to_caller_text_only(tmp_path: Path) -> None:
    """A limit of 20 characters must still let a 20-character turn through."""
    sb = soulpass.open(tmp_path, limits=Limits(max_text_chars=20)).account("u", create=True).create_sandbox("s")
    sb.add_turn("user", "short")
    assert [t["text_excerpt"] for t in sb.buffer().new_turns] == ["short"]


def test_event_byte_limit(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, limits=Limits(max_event_bytes=2000)).account("u", create=True)
    sb = acct.create_sandbox("s")
    lines = len(buffer_file(sb).read_bytes().splitlines())
    with pytest.raises(InvalidInput, match="bytes"):
        sb.update_state("ire", {f"k{i}": "v" * 50 for i in range(60)})
    assert len(buffer_file(sb).read_bytes().splitlines()) == lines


# --- schema violations ----------------------------------------------------------------------

SCHEMA_CASES: dict[str, tuple[Callable[[Env], Any], tuple[str, ...]]] = {
    "turn confidence 1.5": (lambda e: e.sb.add_turn("eva", "hi", confidence=1.5), ("confidence",)),
    "turn confidence -0.1": (lambda e: e.sb.add_turn("eva", "hi", confidence=-0.1), ("confidence",)),
    "fact confidence 1.5": (lambda e: e.sb.add_fact("User", "likes", "tea", confidence=1.5), ("confidence",)),
    "fact confidence NaN": (lambda e: e.sb.add_fact("User", "likes", "tea", confidence=float("nan")), ("confidence",)),
    "core confidence 1.5":
        (lambda e: e.sb.propose_core("identity", "x", key="k", confidence=1.5, reason="r"), ("confidence",)),
    "epistemic_mode shout": (lambda e: e.sb.add_turn("eva", "hi", epistemic_mode="shout"), ("epistemic_mode",)),
    "unknown field in V3 episode":
        (lambda e: e.sb.write_episode({"summary": {"action_taken": "a"}, "mood_ring": 1}), ("mood_ring",)),
    "unknown field in summary":
        (lambda e: e.sb.write_episode({"summary": {"action_taken": "a", "vibes": "x"}}), ("vibes",)),
    "unknown field in a turn":
        (lambda e: e.sb.write_turn({"kind": "turn_user", "text_excerpt": "x", "volume": 11}), ("volume",)),
    "episode id mismatch": (lambda e: e.sb.write_episode(
        {"id": "ep_temp_aaaaaaaa", "episode_id": "ep_temp_bbbbbbbb", "summary": {"action_taken": "a"}}),
        ("episode_id",)),
    "RI_global not a number":
        (lambda e: e.sb.write_episode({"summary": {"action_taken": "a"}, "RI_global": "high"}), ("RI_global",)),
    "core proposal with empty reason":
        (lambda e: e.sb.propose_core("identity", "x", key="k", confidence=0.95, reason=""), ("reason",)),
    "core proposal with reason None":
        (lambda e: e.sb.propose_core("identity", "x", key="k", confidence=0.95, reason=None), ("reason",)),
    "core proposal unknown section":
        (lambda e: e.sb.propose_core("soul", "x", key="k", confidence=0.95, reason="r"), ("section",)),
    "core identity without key": (lambda e: e.sb.propose_core("identity", "x", confidence=0.95, reason="r"), ("key",)),
    "core values not a string":
        (lambda e: e.sb.propose_core("values", {"a": 1}, confidence=0.95, reason="r"), ("values",)),
    "turn kind turn_robot":
        (lambda e: e.sb.write_turn({"kind": "turn_robot", "text_excerpt": "beep"}), ("turn_robot",)),
    "turn without text": (lambda e: e.sb.write_turn({"kind": "turn_user"}), ("text_excerpt",)),
    "turn text not a string": (lambda e: e.sb.add_turn("user", 42), ("text_excerpt",)),
    "fact without predicate": (lambda e: e.sb.add_fact("User", None, "tea", confidence=0.9), ("predicate",)),
    "state data not a dict": (lambda e: e.sb.update_state("ire", ["a"]), ("data",)),
    "state key not a string": (lambda e: e.sb.update_state("ire", {1: "a"}), ("key",)),
    "seed turn not an object": (lambda e: e.sb.write_episode({"episode_id": "ep_001", "turn_1": "hello"}), ("turn_1",)),
    "seed timestamp not ISO": (lambda e: e.sb.write_episode(
        {"episode_id": "ep_001", "timestamp": "yesterday", "turn_1": {"speaker": "user", "text": "x"}}),
        ("timestamp",)),
    "state value NaN": (lambda e: e.sb.update_state("ire", {"arousal": float("nan")}), ("arousal",)),
    "state value Infinity": (lambda e: e.sb.update_state("ire", {"arousal": float("inf")}), ("arousal",)),
    "RI_global NaN":
        (lambda e: e.sb.write_episode({"summary": {"action_taken": "a"}, "RI_global": float("nan")}), ("RI_global",)),
}


@pytest.mark.parametrize("case", list(SCHEMA_CASES))
def test_schema_violation_refused(env: Env, case: str) -> None:
    action, needles = SCHEMA_CASES[case]
    expect_refused(env, lambda: action(env), *needles)


# --- nothing but InvalidInput escapes -------------------------------------------------------

LEAK_CASES: dict[str, Callable[[Env], Any]] = {
    "state value not JSON-serialisable": lambda e: e.sb.update_state("ire", {"obj": object()}),
    "core value not JSON-serialisable":
        lambda e: e.sb.propose_core("worldview", object(), key="k", confidence=0.95, reason="r"),
    "state value invalid UTF-8 bytes": lambda e: e.sb.update_state("ire", {"raw": b"\xff\xfe"}),
    "write_turn with a str": lambda e: e.sb.write_turn("hello"),
    "write_episode with a str": lambda e: e.sb.write_episode("hello"),
    "write_episode with a list": lambda e: e.sb.write_episode(["x"]),
    "add_fact with nothing": lambda e: e.sb.add_fact(confidence=0.9),
    "update_profile with a list": lambda e: e.sb.update_profile(["x"]),
}


@pytest.mark.parametrize("case", list(LEAK_CASES))
def test_no_foreign_exception_leaks(env: Env, case: str) -> None:
    action = LEAK_CASES[case]
    expect_refused(env, lambda: action(env))


def test_invalid_input_is_a_soulpass_error_not_a_value_error() -> None:
    assert issubclass(InvalidInput, SoulpassError)
    assert not issubclass(InvalidInput, ValueError)
    err = InvalidInput("record id '..' is bad", field="record id")
    assert err.details == {"field": "record id"} and str(err) == "record id '..' is bad"


def test_pydantic_error_is_chained_not_raised(env: Env) -> None:
    with pytest.raises(InvalidInput) as info:
        env.sb.add_turn("eva", "hi", confidence=1.5)
    assert isinstance(info.value.__cause__, ValidationError)  # kept for debugging, never raised


# --- the MSP facade: one call, all or nothing ------------------------------------------------


def test_msp_write_to_session_buffer_is_all_or_nothing(env: Env) -> None:
    msp = soulpass.MSP(env.home, limits=LIMITS)
    entry = {
        "episode": {"episode_id": "ep_1", "turn_1": {"speaker": "user", "text": "hi"},
                    "turn_2": {"speaker": "eva", "text": "hello"}},
        "state_updates": {"ire_state": {"ok": 1}, "../../etc": {"evil": 1}},
    }
    expect_refused(env, lambda: msp.write_to_session_buffer(env.sb.id, entry), "state name")


def test_msp_unknown_buffer_key_refused(env: Env) -> None:
    msp = soulpass.MSP(env.home, limits=LIMITS)
    expect_refused(env, lambda: msp.write_to_session_buffer(env.sb.id, {"episodes": []}), "episodes")


def test_rules_errors_are_config_errors() -> None:
    with pytest.raises(soulpass.ConfigError, match="min_confidence"):
        soulpass.Rules.from_yaml("semantic: {min_confidence: 2}")
    with pytest.raises(soulpass.ConfigError):
        soulpass.Rules.from_yaml("core: [oops")
