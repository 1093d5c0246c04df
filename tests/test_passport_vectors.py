"""``export --vectors`` (issue 15, item 1): the passport carries the account's vectors, so an
import into a home with the same embedder embeds nothing again; another embedder ignores them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import soulpass
from soulpass.cli.main import cli
from soulpass.engine import Soulpass
from soulpass.errors import Corrupted, InvalidInput
from soulpass.passport import export_account, import_account
from soulpass.passport.format import MANIFEST, MANIFEST_DIGEST, VECTORS, canonical, sha256

TEXTS = ["I moved to Lyon last spring, the flat is near the river",
         "We adopted a grey cat called Miso who loves tuna",
         "My sister works as a nurse in Geneva and visits in June"]


def _account(home: Path) -> Soulpass:
    sp = soulpass.open(home)
    sb = sp.create_account("ann").create_sandbox("s")
    for text in TEXTS:
        sb.add_turn("user", text)
    sb.add_journal("# Long entry\n\n" + " ".join(f"Sentence {n} about the garden and the roses." for n in range(40)))
    sb.archive()
    return sp


class Counting:
    """Wraps an embedder's batch path: how many texts it was asked to embed."""

    def __init__(self, embedder: Any) -> None:
        self.embedder, self.texts = embedder, []
        self.real = embedder.embed_batch

    def __call__(self, texts: list[str]) -> Any:
        self.texts += texts
        return self.real(texts)


def test_an_import_with_vectors_embeds_nothing_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sp = _account(tmp_path / "a")
    res = export_account(sp, "ann", tmp_path / "ann.soulpass", vectors=True)
    assert res.vectors is not None and res.vectors >= len(TEXTS) + 1  # the journal's passages too
    listed = json.loads(zipfile.ZipFile(tmp_path / "ann.soulpass").read(MANIFEST))["vectors"]
    assert listed["name"] == VECTORS and listed["count"] == res.vectors

    other = soulpass.open(tmp_path / "b")
    imported = import_account(other, tmp_path / "ann.soulpass")
    assert imported.vectors is not None and imported.vectors.startswith("used")
    embedder = other.embedder()
    assert embedder is not None
    counting = Counting(embedder)
    monkeypatch.setattr(embedder, "embed_batch", counting)
    hits = other.account("ann").search("a pet that likes fish", 3)
    assert [t for t in counting.texts if "pet" not in t] == []  # only the query: every vector came along
    assert "Miso" in hits[0].text

    plain = soulpass.open(tmp_path / "c")  # the same passport without vectors: everything is embedded
    export_account(sp, "ann", tmp_path / "plain.soulpass")
    assert import_account(plain, tmp_path / "plain.soulpass").vectors is None
    plain_embedder = plain.embedder()
    assert plain_embedder is not None
    counting = Counting(plain_embedder)
    monkeypatch.setattr(plain_embedder, "embed_batch", counting)
    assert plain.account("ann").search("a pet that likes fish", 3)[0].id == hits[0].id  # same order
    assert len(counting.texts) > len(TEXTS)


def test_vectors_of_another_embedder_are_ignored_and_said_so(tmp_path: Path) -> None:
    sp = _account(tmp_path / "a")
    export_account(sp, "ann", tmp_path / "ann.soulpass", vectors=True)
    res = import_account(soulpass.open(tmp_path / "b", embedder="none"), tmp_path / "ann.soulpass")
    assert res.vectors is not None and res.vectors.startswith("ignored") and "no embedder" in res.vectors


def test_a_tampered_vector_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    sp = _account(tmp_path / "a")
    export_account(sp, "ann", tmp_path / "ann.soulpass", vectors=True)
    with zipfile.ZipFile(tmp_path / "ann.soulpass") as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members[VECTORS] = members[VECTORS][:-10] + b"0123456789"
    with zipfile.ZipFile(tmp_path / "bad.soulpass", "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    target = soulpass.open(tmp_path / "b")
    with pytest.raises(Corrupted, match=r"vectors/seed\.npz"):
        import_account(target, tmp_path / "bad.soulpass")
    assert target.accounts() == []
    manifest = json.loads(members[MANIFEST])
    manifest["vectors"]["name"] = "../escape.npz"
    members[MANIFEST] = canonical(manifest)
    members[MANIFEST_DIGEST] = (sha256(members[MANIFEST]) + "\n").encode()
    with zipfile.ZipFile(tmp_path / "bad2.soulpass", "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    with pytest.raises(Corrupted, match="vectors"):
        import_account(target, tmp_path / "bad2.soulpass")
    assert target.accounts() == []


def test_export_vectors_needs_an_embedder(tmp_path: Path) -> None:
    sp = soulpass.open(tmp_path / "a", embedder="none")
    sp.create_account("ann")
    with pytest.raises(InvalidInput, match="--vectors needs an embedder"):
        export_account(sp, "ann", tmp_path / "x.soulpass", vectors=True)
    assert not (tmp_path / "x.soulpass").exists()


def test_cli_export_vectors(tmp_path: Path) -> None:
    _account(tmp_path / "a")
    out = CliRunner().invoke(cli, ["--home", str(tmp_path / "a"), "export", "ann", "-o", str(tmp_path / "v.soulpass"),
                                   "--vectors", "--json"], env={"SOULPASS_HOME": "", "SOULPASS_ACCOUNT": ""})
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["vectors"] > 0
    got = CliRunner().invoke(cli, ["--home", str(tmp_path / "b"), "import", "passport", str(tmp_path / "v.soulpass")],
                             env={"SOULPASS_HOME": "", "SOULPASS_ACCOUNT": ""})
    assert got.exit_code == 0, got.output
    assert "vectors: used" in got.output
