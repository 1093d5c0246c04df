"""Ingest: read a document (path, URL or text), reduce HTML to text, and chunk it for the index."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Literal

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


class _TextOfHtml(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                        "header", "footer", "pre", "blockquote", "table", "ul", "ol", "hr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: str | None = None
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skip += 1
        if tag in self._BLOCK:
            self.parts.append("\n")
        if tag in ("h1", "h2", "h3") and not self._skip:
            self.parts.append("#" * int(tag[1]) + " ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title and self.title is None and data.strip():
            self.title = " ".join(data.split())
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str | None]:
    """(text, title): scripts and styles dropped, blocks on their own lines, headings as ``#``."""
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return text, parser.title


def _decode(raw: bytes, charset: str | None, where: str) -> str:
    try:
        return raw.decode(charset or "utf-8")
    except (UnicodeDecodeError, LookupError) as exc:
        raise InvalidInput(f"{where} is not text in {charset or 'utf-8'}: {exc}", field="source") from exc


def _fetch(url: str) -> Document:
    req = urllib.request.Request(url, headers={"User-Agent": "soulpass-ingest/1"})
    try:
        with urllib.request.urlopen(req, timeout=URL_TIMEOUT) as resp:
            raw = resp.read(MAX_DOWNLOAD + 1)
            ctype = resp.headers.get_content_type()
            charset = resp.headers.get_content_charset()
    except urllib.error.HTTPError as exc:
        raise NotFound(f"{url} answered HTTP {exc.code}", url=url) from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise BackendUnavailable(f"cannot fetch {url}: {exc}", url=url) from exc
    if len(raw) > MAX_DOWNLOAD:
        raise InvalidInput(f"{url} is larger than {MAX_DOWNLOAD} bytes", field="source")
    if not (ctype.startswith("text/") or ctype in ("application/json", "application/xhtml+xml", "application/xml")):
        raise InvalidInput(f"{url} is {ctype}, not text", field="source")
    text = _decode(raw, charset, url)
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
