"""API keys: shown once, only a hash stored, crash-safe file, revocation, roles, the CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from soulpass.cli.main import cli
from soulpass.errors import InvalidInput, NotFound
from soulpass.server.keys import ApiKey, FileKeyStore, KeyStore, NewKey, Role


def test_key_is_returned_once_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    keys = FileKeyStore(tmp_path)
    new = keys.create("ann", label="laptop")
    raw = (tmp_path / "keys.json").read_text(encoding="utf-8")
    assert new.secret not in raw
    secret_part = new.secret.split("_", 2)[2]
    assert secret_part not in raw
    assert hashlib.sha256(new.secret.encode()).hexdigest() in raw
    assert (tmp_path / "keys.json").stat().st_mode & 0o777 == 0o600
    assert keys.verify(new.secret) == new.key
    assert new.key.account == "ann" and not new.key.admin


def test_the_key_file_is_never_readable_by_others_not_even_before_its_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import soulpass.store.fsio as fsio

    modes: list[int] = []
    real_replace = fsio.os.replace

    def replace(src: Any, dst: Any) -> None:
        modes.append(Path(src).stat().st_mode & 0o777)
        real_replace(src, dst)

    (tmp_path / ".keys.json.tmp").write_text("left by a crash")  # an old temp file, mode 0644
    monkeypatch.setattr(fsio.os, "replace", replace)
    keys = FileKeyStore(tmp_path)
    keys.create("ann")
    keys.create("bob")
    assert modes and set(modes) == {0o600}


def test_wrong_malformed_and_revoked_keys_are_refused(tmp_path: Path) -> None:
    keys = FileKeyStore(tmp_path)
    a = keys.create("ann")
    admin = keys.create(None)
    assert admin.key.admin
    forged = a.secret[:-4] + ("AAAA" if not a.secret.endswith("AAAA") else "BBBB")
    for bad in (forged, "", "sp_", "Bearer x", a.secret + " ", "sp_zzzzzzzz_" + "a" * 43):
        assert keys.verify(bad) is None, bad
    keys.revoke(a.key.key_id)
    assert keys.verify(a.secret) is None
    assert FileKeyStore(tmp_path).verify(admin.secret) == admin.key  # another process sees the same file
    with pytest.raises(NotFound):
        keys.revoke(a.key.key_id)


def test_keys_survive_a_reopen_and_a_leftover_temp_file(tmp_path: Path) -> None:
    keys = FileKeyStore(tmp_path)
    a = keys.create("ann")
    (tmp_path / ".keys.json.tmp").write_text("{ torn", encoding="utf-8")  # a crash mid-write leaves this
    again = FileKeyStore(tmp_path)
    assert again.verify(a.secret) == a.key
    b = again.create("bob")
    assert {k.key_id for k in FileKeyStore(tmp_path).list()} == {a.key.key_id, b.key.key_id}
    assert json.loads((tmp_path / "keys.json").read_text(encoding="utf-8"))["format"] == "soulpass-keys/2"


def test_bad_account_names_and_labels_are_refused(tmp_path: Path) -> None:
    keys = FileKeyStore(tmp_path)
    for bad in ("../x", "", "a/b"):
        with pytest.raises(InvalidInput):
            keys.create(bad)
    with pytest.raises(InvalidInput):
        keys.create("ann", label="two\nlines")
    assert keys.list() == []


def test_cli_key_create_list_revoke(tmp_path: Path) -> None:
    runner = CliRunner()
    home = str(tmp_path / "home")

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, ["--home", home, *args], env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""})
        assert result.exit_code == code, f"{args}: {result.output}"
        return result.stdout

    run("key", "create", "ann", code=3)  # no such account
    run("account", "create", "ann")
    secret = run("key", "create", "ann", "--label", "ci").strip()
    assert FileKeyStore(home).verify(secret) is not None
    admin = run("key", "create", "--admin").strip()
    assert FileKeyStore(home).verify(admin).admin  # type: ignore[union-attr]
    run("key", "create", "ann", "--admin", code=2)
    agent = run("key", "create", "ann", "--role", "agent").strip()
    assert FileKeyStore(home).verify(agent).role == "agent"  # type: ignore[union-attr]
    assert FileKeyStore(home).verify(secret).role == "owner"  # type: ignore[union-attr]  # the default
    run("key", "create", "--admin", "--role", "agent", code=2)  # an admin key has no role
    run("key", "create", "ann", "--role", "root", code=2)
    listed = json.loads(run("key", "list", "--json"))
    assert {k["account"] for k in listed} == {"ann", None}
    assert sorted(k["role"] for k in listed) == ["admin", "agent", "owner"]
    assert secret not in json.dumps(listed)
    assert "agent" in run("key", "list")
    key_id = next(k["key_id"] for k in listed if k["account"] == "ann" and k["role"] == "owner")
    run("key", "revoke", key_id)
    assert FileKeyStore(home).verify(secret) is None


class MemoryKeys:
    """A second ``KeyStore``: the server needs nothing but the Protocol."""

    def __init__(self) -> None:
        self.keys: dict[str, ApiKey] = {}

    def list(self) -> list[ApiKey]:
        return list(self.keys.values())

    def verify(self, secret: str) -> ApiKey | None:
        return self.keys.get(secret)

    def create(self, account: str | None, label: str = "", role: Role = "owner") -> NewKey:
        key = ApiKey(key_id=f"k{len(self.keys)}", account=account, created_at="2025-01-01", label=label, sha256="",
                     role=role)
        self.keys[f"secret-{key.key_id}"] = key
        return NewKey(key, f"secret-{key.key_id}")

    def revoke(self, key_id: str) -> ApiKey:
        secret = next(s for s, k in self.keys.items() if k.key_id == key_id)
        return self.keys.pop(secret)


def test_the_server_takes_any_key_store(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    import soulpass
    from soulpass.server.app import create_app

    sp = soulpass.open(tmp_path, embedder="none")
    sp.create_account("ann").close()
    keys: KeyStore = MemoryKeys()
    secret, admin = keys.create("ann").secret, keys.create(None).secret
    with TestClient(create_app(sp, keys=keys)) as client:
        ok = client.get("/v1/accounts/ann", headers={"Authorization": f"Bearer {secret}"})
        assert ok.status_code == 200, ok.text
        assert client.get("/v1/accounts/ann", headers={"Authorization": "Bearer nope"}).status_code == 401
        made = client.post("/v1/accounts/ann/keys", json={"label": "ci"}, headers={"Authorization": f"Bearer {admin}"})
        assert made.status_code == 201, made.text
    assert not (tmp_path / "keys.json").exists()  # the file store was never touched
    assert sorted(k.label for k in keys.list()) == ["", "", "ci"]
