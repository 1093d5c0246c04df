"""The package installs and runs outside a checkout: ``python -m build`` gives an sdist and a wheel,
the wheel carries every file of the package (templates, static files, the tokenizer), and a fresh
virtual environment with the wheel and its ``embed`` and ``server`` extras, in a folder with no
checkout in sight, runs ``soulpass demo``, a search with the embedded model and ``soulpass serve``
answering the memory browser. pip resolves the extras from the wheel's own metadata (its cache or
the index); nothing of this checkout is on the path."""

from __future__ import annotations

import http.cookiejar
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "soulpass"

pytestmark = pytest.mark.slow


def _package_data() -> set[str]:
    """Every file of the package that is not Python source: what package-data must carry."""
    return {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}


def _env() -> dict[str, str]:
    """The environment without this checkout: no PYTHONPATH, no virtual environment, no home of ours."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "SOULPASS_HOME", "SOULPASS_ACCOUNT", "PYTHONHOME")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run(*args: str | Path, cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist and a wheel built by ``python -m build`` from a copy of the project (the wheel is
    built from the sdist, so the sdist is checked too; the checkout gets no build folders)."""
    src = tmp_path_factory.mktemp("project")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, src, cwd=src, timeout=600)
    return out


def test_build_gives_an_sdist_and_a_wheel_with_every_package_file(dist: Path) -> None:
    (wheel,), (sdist,) = dist.glob("*.whl"), dist.glob("*.tar.gz")
    data = _package_data()
    assert {"soulpass/embed/minilm_tokenizer.json", "soulpass/server/ui/templates/base.html",
            "soulpass/server/ui/static/ui.css", "soulpass/py.typed"} <= data
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert data - in_wheel == set(), "package files missing from the wheel (pyproject.toml package-data)"
    with tarfile.open(sdist) as tar:
        in_sdist = {n.split("/", 2)[2] for n in tar.getnames() if n.count("/") >= 2 and "/src/" in n}
    assert data - in_sdist == set()
    entry = next(n for n in in_wheel if n.endswith("entry_points.txt"))
    assert "soulpass = soulpass.cli.main:main" in zipfile.ZipFile(wheel).read(entry).decode()


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the ``soulpass`` script of a fresh venv with the wheel and its embed and server extras, a
    folder far from the checkout to run it in)."""
    (wheel,) = dist.glob("*.whl")
    away = tmp_path_factory.mktemp("elsewhere")
    venv = away / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=away)
    python = venv / "bin" / "python"
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--find-links", dist,
         f"{wheel}[embed,server]", cwd=away, timeout=900)
    where = _run(python, "-c", "import soulpass; print(soulpass.__file__)", cwd=away)
    assert Path(where.strip()).is_relative_to(venv), where  # the wheel's copy, not this checkout
    yield venv / "bin" / "soulpass", away


def test_the_installed_wheel_runs_the_demo_and_searches_with_the_embedded_model(
        installed: tuple[Path, Path]) -> None:
    soulpass, away = installed
    home = away / "home"
    assert "demo ok" in _run(soulpass, "--home", home, "demo", cwd=away)
    # No word of the query is in the demo's memory: only the embedded model's vectors can find CSS.
    hits = json.loads(_run(soulpass, "--home", home, "search", "stylesheets", "-a", "User01", "-k", "3", "--json",
                           cwd=away))
    assert hits and all(h["parts"]["dense"] > 0 for h in hits)
    assert "CSS" in hits[0]["text"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_installed_wheel_serves_the_memory_browser(installed: tuple[Path, Path]) -> None:
    soulpass, away = installed
    home = away / "served"
    _run(soulpass, "--home", home, "demo", cwd=away)
    key = _run(soulpass, "--home", home, "key", "create", "User01", cwd=away).split()[0]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([str(soulpass), "--home", str(home), "serve", "--port", str(port)], cwd=away,
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        deadline = time.monotonic() + 120
        while True:
            try:
                with browser.open(f"{base}/ui", timeout=10) as r:
                    assert r.status == 200 and r.headers["X-Soulpass-Login"] == "required"
                    assert 'name="key"' in r.read().decode()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "the server did not answer /ui"
                time.sleep(0.5)
        form = urllib.parse.urlencode({"key": key}).encode()
        with browser.open(f"{base}/ui/login", data=form, timeout=30) as r:  # 303 to the account's page
            assert r.status == 200 and r.url.endswith("/ui/a/User01") and "User01" in r.read().decode()
        with browser.open(f"{base}/ui/a/User01/search?q=stylesheets", timeout=60) as r:
            assert "Can we talk about CSS?" in r.read().decode()
        for path in ("/ui/static/ui.css", "/ui/static/vendor/cytoscape.min.js", "/docs", "/openapi.json"):
            with browser.open(base + path, timeout=30) as r:
                assert r.status == 200 and r.read(), path
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    assert "Traceback" not in out, out[-3000:]
