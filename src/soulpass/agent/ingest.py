"""Ingest: read a document (path, URL or text), reduce HTML to its main text, and chunk it for the index.

URLs are fetched with httpx and HTML is read with trafilatura (extra ``agent``)."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from soulpass.errors import BackendUnavailable, InvalidInput, NotFound

__all__ = ["Document", "SourceKind", "chunk_text", "html_to_text", "read_source"]

SourceKind = Literal["auto", "path", "url", "text"]
URL_TIMEOUT = 20.0
MAX_DOWNLOAD = 8 * 1024 * 1024


@dataclass(frozen=True)
class Document:
    text: str
    source: str  # the URL, the path, or "text"
    media_type: str
    title: str | None = None


def html_to_text(html: str) -> tuple[str, str | None]:
    """(text, title) of a web page: its main content as Markdown (headings, lists, tables), with
    navigation, scripts and boilerplate dropped (trafilatura, extra ``agent``); all of its text when
    no main content stands out."""
    trafilatura = _module("trafilatura", "reading HTML")
    text = trafilatura.extract(html, output_format="markdown", include_formatting=True, include_tables=True,
                               include_comments=False, favor_recall=True) or trafilatura.html2txt(html) or ""
    meta = trafilatura.extract_metadata(html)
    title = " ".join(meta.title.split()) if meta is not None and meta.title else None
    return text.strip(), title


def _module(name: str, what: str) -> Any:
    """A library of the ``agent`` extra, or ``BackendUnavailable`` saying how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise BackendUnavailable(f"{what} needs the 'agent' extra ({name}): pip install -e '.[agent]'") from exc


def _decode(raw: bytes, charset: str | None, where: str) -> str:
    try:
        return raw.decode(charset or "utf-8")
    except (UnicodeDecodeError, LookupError) as exc:
        raise InvalidInput(f"{where} is not text in {charset or 'utf-8'}: {exc}", field="source") from exc


def _fetch(url: str) -> Document:
    httpx = _module("httpx", "fetching a URL")
    try:
        with httpx.stream("GET", url, headers={"User-Agent": "soulpass-ingest/1"}, timeout=URL_TIMEOUT,
                          follow_redirects=True) as resp:
            if resp.status_code >= 400:
                raise NotFound(f"{url} answered HTTP {resp.status_code}", url=url)
            raw = bytearray()
            for chunk in resp.iter_bytes():
                raw += chunk
                if len(raw) > MAX_DOWNLOAD:
                    raise InvalidInput(f"{url} is larger than {MAX_DOWNLOAD} bytes", field="source")
            ctype = (resp.headers.get("content-type") or "text/plain").split(";")[0].strip().lower()
            charset = resp.charset_encoding
    except httpx.HTTPError as exc:
        raise BackendUnavailable(f"cannot fetch {url}: {exc}", url=url) from exc
    if not (ctype.startswith("text/") or ctype in ("application/json", "application/xhtml+xml", "application/xml")):
        raise InvalidInput(f"{url} is {ctype}, not text", field="source")
    text = _decode(bytes(raw), charset, url)
    if ctype in ("text/html", "application/xhtml+xml"):
        body, title = html_to_text(text)
        return Document(body, url, ctype, title)
    return Document(text, url, ctype)


def read_source(source: str | Path, kind: SourceKind = "auto") -> Document:
    """The document ``source`` names. ``auto``: an http(s) URL, else an existing file, else text."""
    if isinstance(source, Path):
        kind = "path" if kind == "auto" else kind
        source = str(source)
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("nothing to ingest: the source is empty", field="source")
    if kind == "auto":
        if re.match(r"^https?://", source):
            kind = "url"
        elif "\n" not in source and len(source) < 4096 and Path(source).expanduser().is_file():
            kind = "path"
        else:
            kind = "text"
    if kind == "url":
        if not re.match(r"^https?://", source):
            raise InvalidInput(f"only http(s) URLs can be ingested, not {source[:80]!r}", field="source")
        return _fetch(source)
    if kind == "path":
        path = Path(source).expanduser()
        if not path.is_file():
            raise NotFound(f"{path} is not a file", path=str(path))
        text = _decode(path.read_bytes(), "utf-8", str(path))
        if path.suffix.lower() in (".html", ".htm"):
            body, title = html_to_text(text)
            return Document(body, str(path), "text/html", title)
        media = "text/markdown" if path.suffix.lower() in (".md", ".markdown") else "text/plain"
        return Document(text, str(path), media)
    return Document(source, "text", "text/plain")


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Chunks of at most ``size`` characters, cut at a paragraph, line or sentence end where one
    falls in the chunk's second half; consecutive chunks share about ``overlap`` characters."""
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    chunks = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            window = text[start:end]
            cut = -1
            for sep in ("\n\n", "\n", ". ", "? ", "! ", " "):
                cut = window.rfind(sep, size // 2)
                if cut != -1:
                    cut += len(sep)
                    break
            if cut > 0:
                end = start + cut
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        nxt = max(end - overlap, start + 1)
        space = text.find(" ", nxt, end)
        start = space + 1 if space != -1 else nxt
    return chunks
