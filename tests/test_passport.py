"""The passport: export an account as one zip, import it back verified, on both backends."""

from __future__ import annotations

import json
import re
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import soulpass
from postgres_helpers import postgres_url
from server_world import World
from soulpass.cli.main import cli
from soulpass.errors import Conflict, Corrupted, InvalidInput
from soulpass.passport import export_account, import_account
from soulpass.passport.format import MANIFEST, MANIFEST_DIGEST, canonical, sha256, tree_digest


def _fill(s: soulpass.engine.Soulpass) -> None:
    acct = s.create_account("ann")
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "I moved to Lyon last spring")
    sb.add_fact("Ann", "lives in", "Lyon", confidence=0.9)
    sb.add_journal("# Moving\n\nBoxes everywhere.", tags=["move"])
    sb.archive()
    sb = acct.create_sandbox("t")
    sb.add_fact("Ann", "lives in", "Paris", confidence=0.95)  # supersedes: history gets a copy
    sb.archive()


@pytest.fixture(params=["files", "postgres"])
def sp(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[soulpass.engine.Soulpass]:
    if request.param == "files":
        s = soulpass.open(tmp_path / "home", embedder="none")
        _fill(s)
        yield s
    else:
        for url in postgres_url(tmp_path):
            s = soulpass.open(url, embedder="none")
            _fill(s)
            yield s


@pytest.mark.parametrize("history", [False, True])
def test_round_trip_gives_the_same_tree(sp: soulpass.engine.Soulpass, tmp_path: Path, history: bool) -> None:
    first = export_account(sp, "ann", tmp_path / "ann.soulpass", history=history)
    assert first.head == 2 and zipfile.is_zipfile(first.path)
    names = zipfile.ZipFile(first.path).namelist()
    assert any(n.startswith("files/history/") for n in names) is history
    got = import_account(sp, first.path, as_name="bob")
    assert got.account == "bob" and got.tree_sha256 == first.tree_sha256
    again = export_account(sp, "bob", tmp_path / "bob.soulpass", history=history)
    assert again.tree_sha256 == first.tree_sha256 and again.head == 2
    assert [f.object for f in sp.account("bob").records("fact")] == ["Lyon", "Paris"]


def test_import_into_an_existing_account_needs_as(sp: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    res = export_account(sp, "ann", tmp_path / "ann.soulpass")
    with pytest.raises(Conflict, match="--as"):
        import_account(sp, res.path)
    assert sp.accounts() == ["ann"]


def _rewrite(src: str, dst: Path, *, edit: dict[str, bytes | None] | None = None,
             add: list[tuple[zipfile.ZipInfo | str, bytes]] | None = None,
             manifest: dict | None = None) -> Path:  # type: ignore[type-arg]
    """A copy of the passport with entries replaced, dropped or added, the manifest optionally rewritten
    (and its digest made to match, as a careful attacker would)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if manifest is not None and info.filename in (MANIFEST, MANIFEST_DIGEST):
                continue
            if edit and info.filename in edit:
                if edit[info.filename] is None:
                    continue
                data = edit[info.filename]  # type: ignore[assignment]
            zout.writestr(info.filename, data)
        if manifest is not None:
            body = canonical(manifest)
            zout.writestr(MANIFEST, body)
            zout.writestr(MANIFEST_DIGEST, sha256(body) + "\n")
        with pytest.warns(UserWarning) if any(isinstance(a, str) and a in zin.namelist()
                                                for a, _ in add or []) else _nothing():
            for name, data in add or []:
                zout.writestr(name, data)
    return dst


class _nothing:
    def __enter__(self) -> None: ...
    def __exit__(self, *a: object) -> None: ...


@pytest.fixture
def home(tmp_path: Path) -> soulpass.engine.Soulpass:
    s = soulpass.open(tmp_path / "home", embedder="none")
    _fill(s)
    return s


def _hostile(home: soulpass.engine.Soulpass, tmp_path: Path, case: str) -> Path:
    src = export_account(home, "ann", tmp_path / "ann.soulpass", history=True).path
    man = json.loads(zipfile.ZipFile(src).read(MANIFEST))
    first = "files/" + man["entries"][0]["name"]
    out = tmp_path / f"{case}.soulpass"
    if case == "tampered":
        return _rewrite(src, out, edit={first: b"tampered"})
    if case == "missing":
        return _rewrite(src, out, edit={first: None})
    if case == "truncated":
        data = Path(src).read_bytes()
        out.write_bytes(data[: len(data) // 2])
        return out
    if case in ("slip", "absolute", "extra"):
        name = {"slip": "files/../../evil", "absolute": "/etc/evil", "extra": "files/core/evil.md"}[case]
        return _rewrite(src, out, add=[(name, b"x")])
    if case == "symlink":
        info = zipfile.ZipInfo("files/core/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        return _rewrite(src, out, add=[(info, b"/etc/passwd")])
    if case == "duplicate":
        return _rewrite(src, out, add=[(first, b"again")])
    if case == "version":
        return _rewrite(src, out, manifest={**man, "format_version": 99})
    if case == "lying-manifest":
        entries = [dict(e) for e in man["entries"]]
        entries[0]["sha256"] = "0" * 64
        return _rewrite(src, out, manifest={**man, "entries": entries, "tree_sha256": tree_digest(entries)})
    if case == "lying-digest":
        return _rewrite(src, out, edit={MANIFEST: canonical({**man, "head": 9})})
    if case == "huge":
        entries = [dict(e) for e in man["entries"]]
        entries[0]["size"] = 1 << 40
        return _rewrite(src, out, manifest={**man, "entries": entries, "tree_sha256": tree_digest(entries)})
    raise AssertionError(case)


@pytest.mark.parametrize("case, error, names", [
    ("tampered", Corrupted, "files/"), ("missing", Corrupted, "files/"), ("truncated", Corrupted, "not a passport"),
    ("slip", InvalidInput, "../"), ("absolute", InvalidInput, "/etc/evil"), ("extra", Corrupted, "evil.md"),
    ("symlink", InvalidInput, "files/core/link"), ("duplicate", InvalidInput, "twice"),
    ("version", InvalidInput, "version 99"), ("lying-manifest", Corrupted, "files/"),
    ("lying-digest", Corrupted, MANIFEST), ("huge", InvalidInput, "limit"),
])
def test_hostile_bundles_are_refused_and_nothing_is_created(home: soulpass.engine.Soulpass, tmp_path: Path,
                                                            case: str, error: type, names: str) -> None:
    bad = _hostile(home, tmp_path, case)
    with pytest.raises(error, match=re.escape(names)):
        import_account(home, bad, as_name="bob")
    assert home.accounts() == ["ann"]
    assert not (tmp_path / "evil").exists()


def test_size_limit_is_configurable(home: soulpass.engine.Soulpass, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    src = export_account(home, "ann", tmp_path / "ann.soulpass").path
    with pytest.raises(InvalidInput, match="limit of 10"):
        import_account(home, src, as_name="bob", max_entry=10)
    with pytest.raises(InvalidInput, match="limit of 100"):
        import_account(home, src, as_name="bob", max_total=100)
    monkeypatch.setenv("SOULPASS_PASSPORT_MAX_ENTRY", "10")
    got = CliRunner().invoke(cli, ["--home", str(home.home), "import", "passport", src, "--as", "bob"])
    assert got.exit_code != 0 and "limit of 10" in got.output
    assert home.accounts() == ["ann"]


def test_export_of_the_wrong_shape(home: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        export_account(home, "../ann", tmp_path / "x.soulpass")
    with pytest.raises(Exception, match="nobody"):
        export_account(home, "nobody", tmp_path / "x.soulpass")
    assert not (tmp_path / "x.soulpass").exists() and not list(tmp_path.glob(".x.soulpass*"))
    not_zip = tmp_path / "plain.soulpass"
    not_zip.write_bytes(b"hello")
    with pytest.raises(Corrupted, match="not a passport"):
        import_account(home, not_zip, as_name="bob")


def test_cli_export_and_import(home: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "ann.soulpass"
    got = runner.invoke(cli, ["--home", str(home.home), "export", "ann", "-o", str(out), "--history", "--json"])
    assert got.exit_code == 0, got.output
    exported = json.loads(got.output)
    assert exported["manifest_sha256"] == zipfile.ZipFile(out).read(MANIFEST_DIGEST).decode().strip()
    got = runner.invoke(cli, ["--home", str(home.home), "import", "passport", str(out)])
    assert got.exit_code != 0 and "--as" in got.output
    got = runner.invoke(cli, ["--home", str(home.home), "import", "passport", str(out), "--as", "bob", "--json"])
    assert got.exit_code == 0, got.output
    assert json.loads(got.output)["tree_sha256"] == exported["tree_sha256"]
    got = runner.invoke(cli, ["--home", str(home.home), "export", "ann", "-o", str(tmp_path / "b.soulpass")])
    assert got.exit_code == 0 and "manifest sha256" in got.output


def test_rest_export_streams_a_passport_that_imports(client: TestClient, world: World, tmp_path: Path) -> None:
    got = client.get("/v1/accounts/ann/export", params={"history": True}, headers=world.ann.auth)
    assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
    path = tmp_path / "ann.soulpass"
    path.write_bytes(got.content)
    assert zipfile.ZipFile(path).read(MANIFEST_DIGEST).decode().strip() == got.headers["x-soulpass-manifest-sha256"]
    assert import_account(world.engine, path, as_name="carl").account == "carl"
    assert client.get("/v1/accounts/ann/export", headers=world.bob.auth).status_code in (403, 404)


def test_mcp_export_account_writes_a_passport_that_imports(home: soulpass.engine.Soulpass) -> None:
    from soulpass.mcp.tools import MemoryTools
    from soulpass.pool import AccountPool

    got = MemoryTools(AccountPool(home)).export_account("ann")
    assert got["head"] == 2 and Path(got["path"]).name == "ann-v2.soulpass"
    assert import_account(home, got["path"], as_name="dan").tree_sha256 == got["tree_sha256"]


def test_time_travel_on_a_passport_without_history_says_so(sp: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    """Imported without history, the log still lists versions 1..2, but version 1's superseded
    copy is not there: reads of version 1 say "history not carried" instead of a wrong answer."""
    from soulpass.errors import NotFound

    acct = sp.account("ann")
    edit = acct.edit(next(r.id for r in acct.records("turn_user")), text_excerpt="I moved to Lyon in May",
                     reason="month")  # version 3 replaces a turn: version 2 needs its old copy
    bare = import_account(sp, export_account(sp, "ann", tmp_path / "bare.soulpass").path, as_name="bare")
    full = import_account(sp, export_account(sp, "ann", tmp_path / "full.soulpass", history=True).path,
                          as_name="full")
    assert bare.head == full.head == edit
    whole, gap = sp.account("full"), sp.account("bare")
    assert whole.history_floor() is None and gap.history_floor() == edit
    turn = next(r.id for r in whole.records("turn_user"))
    assert whole.show(turn, at=2).text == "I moved to Lyon last spring"
    for read in (lambda: gap.show(turn, at=2), lambda: gap.diff(1, 2), lambda: gap.search("Lyon", at=1),
                 lambda: gap.show("gks", at=1)):
        with pytest.raises(NotFound, match="history not carried"):
            read()
    assert gap.show(turn).text == "I moved to Lyon in May"  # HEAD reads as ever
    assert gap.diff(edit, edit).added == {}
    if sp.location != str(sp.home):
        return  # the CLI over PostgreSQL is the same code; its URL (with a password) is not kept here
    runner = CliRunner()
    home = ["--home", str(sp.home)]
    log = runner.invoke(cli, [*home, "log", "-a", "bare"], env={"COLUMNS": "200"})
    assert log.exit_code == 0 and log.output.count("history not carried") == edit - 1, log.output
    shown = runner.invoke(cli, [*home, "show", turn, "-a", "bare", "--at", "2"])
    assert shown.exit_code != 0 and "history not carried" in shown.output


def test_the_history_floor_reads_the_log_once_then_only_the_versions_since(sp: soulpass.engine.Soulpass,
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """After a commit, ``history_floor`` looks at the new versions only (a commit keeps the copies
    it replaces), and the floor a passport without history left stays."""
    acct = sp.account("ann")
    turn = next(r.id for r in acct.records("turn_user"))
    edit = acct.edit(turn, text_excerpt="I moved to Lyon in May", reason="month")
    import_account(sp, export_account(sp, "ann", tmp_path / "bare.soulpass").path, as_name="bare")
    gap = sp.account("bare")
    asked: list[int] = []
    read_log = gap.store.log

    def spy(since: int = 0, *, lists: bool = True) -> Any:
        asked.append(since)
        return read_log(since, lists=lists)

    monkeypatch.setattr(gap.store, "log", spy)
    assert gap.history_floor() == edit and asked == [0]
    again = gap.edit(turn, text_excerpt="I moved to Lyon in June", reason="month")
    asked.clear()
    assert gap.history_floor() == edit and asked == [edit]  # only the version committed since
    assert gap.history_floor() == edit and asked == [edit]  # HEAD unchanged: nothing read
    assert gap.show(turn, at=again - 1).model_dump(mode="json")["text"] == "I moved to Lyon in May"


def _with_files(src: Path, dst: Path, files: dict[str, bytes], head: int | None = None) -> Path:
    """The passport with ``files`` (names under files/) replaced and every digest made to match."""
    man = json.loads(zipfile.ZipFile(src).read(MANIFEST))
    entries = [dict(e) for e in man["entries"]]
    for e in entries:
        if e["name"] in files:
            e["size"], e["sha256"] = len(files[e["name"]]), sha256(files[e["name"]])
    manifest = {**man, "entries": entries, "tree_sha256": tree_digest(entries)}
    if head is not None:
        manifest["head"] = head
    return _rewrite(str(src), dst, edit={f"files/{k}": v for k, v in files.items()}, manifest=manifest)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("case, names", [
    ("deep-log", "versions.jsonl"), ("very-deep-log", "versions.jsonl"), ("huge-version", "VERSION.json"),
    ("version-not-a-number", "VERSION.json"), ("deep-record", "core/"), ("record-off-schema", "core/"),
    ("copy-newer-than-head", "core/"),
])
def test_hostile_content_with_valid_digests_is_refused(home: soulpass.engine.Soulpass, tmp_path: Path,
                                                       case: str, names: str) -> None:
    """Issue 38 item 5: the passport's digests all match, its content is hostile; it is refused
    like live input and nothing is written."""
    src = export_account(home, "ann", tmp_path / "ann.soulpass", history=True).path
    with zipfile.ZipFile(src) as zf:
        log = zf.read("files/log/versions.jsonl")
        record = next(n for n in zf.namelist() if re.search(r"files/core/.*/TU_\w+\.json$", n))
        record_data = json.loads(zf.read(record))
    name = record.removeprefix("files/")
    head = None
    if case in ("deep-log", "very-deep-log"):
        depth = 200 if case == "deep-log" else 100_000  # 100,000: RecursionError on every open
        lines = log.splitlines()
        last = json.loads(lines[-1].split(b',"seq":')[0] + b"}")
        last["details"] = json.loads(_nested(200)) if depth == 200 else None
        line = json.dumps(last, sort_keys=True).encode()
        if depth != 200:
            line = line.replace(b'"details": null', b'"details": ' + _nested(depth).encode())
        files = {"log/versions.jsonl": b"\n".join([*lines[:-1], line]) + b"\n"}
    elif case == "huge-version":
        files, head = {"core/VERSION.json": b'{"version": 1000000000000000000000000000000, "parent": 1}\n'}, 10**30
    elif case == "version-not-a-number":
        files = {"core/VERSION.json": b'{"version": "2", "parent": 1}\n'}
    elif case == "deep-record":
        files = {name: json.dumps({**record_data, "tags": json.loads(_nested(100))}).encode()}
    elif case == "record-off-schema":
        files = {name: json.dumps({**record_data, "created_at": {"not": "a time"}}).encode()}
    else:
        files = {name: json.dumps({**record_data, "version": 99}).encode()}
    bad = _with_files(Path(src), tmp_path / f"{case}.soulpass", files, head)
    with pytest.raises(InvalidInput, match=re.escape(names)):
        import_account(home, bad, as_name="bob")
    assert home.accounts() == ["ann"]
    assert not (tmp_path / "home/accounts/bob").exists()
