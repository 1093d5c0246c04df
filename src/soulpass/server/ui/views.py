"""What the memory browser's pages show, built from the library's own calls (no HTML here).

Each function takes an :class:`~soulpass.engine.Account` and returns plain dicts and lists for a
template, so what a page says can be tested without a browser. Every read names the version it is
"as of"; pages bound what they read (a page of versions, the first records of a change), so an
account of 100k records costs what its one page costs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

from markdown_it import MarkdownIt

from soulpass.consolidation.internals import personal_diff
from soulpass.consolidation.log_summary import added_counts
from soulpass.engine import Account
from soulpass.engine.listing import log_page
from soulpass.errors import NotFound, SoulpassError
from soulpass.ids import is_permanent_id
from soulpass.store.keys import CLIPBOARD_DIR

__all__ = ["PAGE", "SHOWN", "committed_clipboards", "diff_view", "fact_graph", "forgotten", "markdown", "record_view",
           "rejected_rows", "timeline", "version_view"]

PAGE = 50  # versions per timeline page
SHOWN = 200  # records of one kind a change lists by text (the rest by count)
CHART_KINDS = ("added", "changed", "superseded", "retired", "rejected")

# Markdown without raw HTML (a journal is the agent's writing: it never injects markup into the page).
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def markdown(text: str) -> str:
    """A journal entry's Markdown as HTML, raw HTML in it shown as text."""
    return str(_MD.render(text))


def _count(value: Any) -> int:
    if isinstance(value, dict):
        return sum(len(v) for v in value.values() if isinstance(v, list))
    return len(value) if isinstance(value, list) else 0


def _changed(entry: dict[str, Any]) -> int:
    """Records edited and documents a person changes (core memory, states) in one version."""
    return (1 if entry.get("edited") else 0) + _count(entry.get("core_changes")) + _count(entry.get("state_changes"))


def _summary(entry: dict[str, Any]) -> dict[str, Any]:
    """One version's line of the timeline: when, by what, and how much of each change. ``added``
    counts what the log says the version added (journal entries, clipboards and a rollback's
    restored records included); ``changed`` its edits."""
    added = added_counts(entry)
    counts = {"added": sum(added.values()), "changed": _changed(entry),
              **{k: _count(entry.get(k)) for k in ("superseded", "retired", "rejected")}}
    return {
        "version": int(entry["version"]),
        "timestamp": str(entry.get("timestamp", ""))[:19].replace("T", " "),
        "kind": entry.get("kind", ""),
        "sandbox": entry.get("sandbox_name") or entry.get("source_sandbox") or "",
        "agent": entry.get("agent") or entry.get("by") or "",
        "counts": counts,
        "added_kinds": added,
        "edited": entry.get("edited") or "",
        "replaced": len(entry.get("replaced") or []),
    }


def timeline(acct: Account, before: int | None = None, page: int = PAGE) -> dict[str, Any]:
    """Versions newest first: those below ``before`` (default: up to HEAD), ``page`` of them, with
    the bars of a small chart (added / superseded / retired / rejected per version)."""
    head = acct.head()
    top = head if before is None else max(0, min(before - 1, head))
    since = max(0, top - page)
    entries, _ = log_page(acct, since, top - since) if top > since else ([], None)
    rows = [_summary(e.to_json()) for e in reversed(entries)]
    tallest = max((sum(r["counts"].values()) for r in rows), default=0) or 1
    bars = []
    step = max(12, min(40, 600 // max(len(rows), 1)))
    for n, row in enumerate(reversed(rows)):  # oldest on the left
        y = 0.0
        parts = []
        for kind in CHART_KINDS:
            h = 60.0 * row["counts"][kind] / tallest
            if h:
                parts.append({"kind": kind, "y": round(60.0 - y - h, 2), "h": round(h, 2)})
            y += h
        bars.append({"version": row["version"], "x": n * step, "w": step - 2, "parts": parts,
                     "title": f"v{row['version']}: " + ", ".join(f"{v} {k}" for k, v in row["counts"].items() if v)})
    return {"head": head, "rows": rows, "bars": bars, "width": max(step * len(bars), 12),
            "older": since if since > 0 else None, "newer": top + page + 1 if top < head else None}


def _texts(acct: Account, ids: Iterable[str], at: int) -> list[dict[str, Any]]:
    out = []
    for rid in ids:
        try:
            body = acct.show(rid, at).model_dump(mode="json")
        except SoulpassError:  # a document's path (a journal file), or gone by then
            body = {"id": rid, "text": "" if "/" in rid else "(not readable at this version)"}
        out.append({"id": rid, "kind": body.get("kind", ""), "text": str(body.get("text", ""))[:300]})
    return out


def _document(doc: dict[str, Any], shown: int = 8) -> dict[str, Any]:
    """A changed document with at most ``shown`` keys of each change listed (and how many more)."""
    keys = doc.get("keys") or {}
    out = {"path": doc.get("path", ""), "change": doc.get("change", "")}
    for part in ("added", "changed", "removed"):
        names = [str(k) for k in keys.get(part) or []]
        out[part] = ", ".join(names[:shown]) + (f" … and {len(names) - shown} more" if len(names) > shown else "")
    return out


def diff_view(acct: Account, a: int, b: int, internal: bool = False) -> dict[str, Any]:
    """What changed from ``a`` to ``b``: records added (with their text, the first ``SHOWN`` of a
    kind), facts superseded old → new, records retired, documents changed key by key. The
    knowledge graph's own files are left out (``hidden`` counts them) unless ``internal``."""
    d, hidden = personal_diff(acct.diff(a, b).to_json())
    if internal:
        d, hidden = acct.diff(a, b).to_json(), 0
    added = {kind: {"total": len(ids), "rows": _texts(acct, ids[:SHOWN], b)}
             for kind, ids in sorted((d.get("added") or {}).items()) if ids}
    superseded = []
    for item in (d.get("superseded") or [])[:SHOWN]:
        old, new = item.get("fact"), item.get("by")
        superseded.append({"old": _texts(acct, [old], max(a, b - 1))[0] if old else None,
                           "new": _texts(acct, [new], b)[0] if new else None})
    retired_ids = [r if isinstance(r, str) else r.get("id", "") for r in (d.get("retired") or [])]
    documents = {str(doc.get("path", "")) for doc in d.get("documents") or []}
    replaced = [p for p in d.get("replaced") or [] if p not in documents]
    edited = [PurePosixPath(p).stem for p in replaced if is_permanent_id(PurePosixPath(p).stem)]
    other = [p for p in replaced if not is_permanent_id(PurePosixPath(p).stem)]
    return {"a": a, "b": b, "added": added, "superseded": superseded,
            "superseded_total": len(d.get("superseded") or []),
            "retired": _texts(acct, retired_ids[:SHOWN], a) if retired_ids else [],
            "retired_total": len(retired_ids), "documents": [_document(doc) for doc in d.get("documents") or []],
            "edited": _texts(acct, edited[:SHOWN], b), "edited_total": len(edited), "rewritten": other[:SHOWN],
            "conflicts": d.get("conflicts") or [], "internal": internal, "hidden": hidden,
            "empty": not (added or superseded or retired_ids or d.get("documents") or replaced)}


def rejected_rows(entry: dict[str, Any]) -> list[dict[str, str]]:
    """What a version refused, one row each: the fact or core proposal in words, and why."""
    rows = []
    for item in entry.get("rejected") or []:
        if not isinstance(item, dict):
            rows.append({"what": str(item), "why": ""})
            continue
        inner = item.get("data")
        data: dict[str, Any] = inner if isinstance(inner, dict) else item
        if data.get("section"):  # a core-memory proposal
            where = ".".join(str(p) for p in (data.get("section"), data.get("key")) if p)
            what = f"core {where} = {data.get('value')!r}"
        elif data.get("subject") and data.get("predicate"):
            what = f"fact: {data['subject']} {data['predicate']} {data.get('object', '')}"
        else:
            what = f"fact: {data.get('content') or data.get('text') or item.get('candidate') or ''}"
        confidence = data.get("confidence")
        rows.append({"what": what + (f" (confidence {confidence})" if confidence is not None else ""),
                     "why": str(item.get("why") or item.get("reason") or "")})
    return rows


def version_view(acct: Account, version: int) -> dict[str, Any]:
    """One version: its log entry and what it changed from the one before."""
    entries, _ = log_page(acct, version - 1, 1) if version >= 1 else ([], None)
    if not entries or entries[0].version != version:
        raise NotFound(f"version {version} is not in the log of {acct.name!r} (HEAD is {acct.head()})")
    entry = entries[0].to_json()
    return {"entry": entry, "summary": _summary(entry), "diff": diff_view(acct, version - 1, version),
            "rejected": rejected_rows(entry), "head": acct.head()}


def forgotten(acct: Account, record_id: str, at: int | None) -> dict[str, Any] | None:
    """The version that forgot ``record_id`` (at or before ``at``), with who and why; None when
    no version did (then the record never existed there)."""
    top = acct.head() if at is None else at
    for entry in reversed(acct.log()):
        if entry.version > top or entry.kind != "forget":
            continue
        if record_id in entry.forgotten:
            when = (entry.timestamp or "")[:19].replace("T", " ")
            return {"version": entry.version, "reason": entry.reason or "", "by": entry.by or "", "timestamp": when}
    return None


def committed_clipboards(acct: Account, at: int | None = None) -> dict[str, list[str]]:
    """Every agent's committed clipboard as of ``at`` (default HEAD): agent -> items."""
    snap = acct.store.snapshot(at)
    out: dict[str, list[str]] = {}
    for key in snap.keys(CLIPBOARD_DIR):
        doc = snap.document(key) or {}
        out[PurePosixPath(key).stem] = [str(i) for i in doc.get("items") or []]
    return out


def record_view(acct: Account, record_id: str, at: int | None) -> dict[str, Any]:
    """A record as of ``at`` with what surrounds it: an episode's turns, a turn's episode, a
    journal entry's Markdown, a fact's history and sources."""
    version = acct.check_version(at)
    body = acct.show(record_id, version).model_dump(mode="json")
    kind = str(body.get("kind", ""))
    out: dict[str, Any] = {"id": record_id, "kind": kind, "at": version, "head": acct.head(), "body": body,
                           "related": [], "html": None}
    if kind == "episode":
        refs = body.get("turn_refs") or body.get("turns") or []
        out["related"] = _texts(acct, [r for r in refs if isinstance(r, str)][:SHOWN], version)
        out["related_title"] = "Turns of this episode"
    elif kind in ("turn_user", "turn_llm") and body.get("episode_ref"):
        out["related"] = _texts(acct, [body["episode_ref"]], version)
        out["related_title"] = "Its episode"
    elif kind == "fact":
        refs = [r for r in body.get("source_refs") or [] if isinstance(r, str)]
        out["related"] = _texts(acct, refs[:SHOWN], version)
        out["related_title"] = "Sources"
    if kind == "journal":
        out["html"] = markdown(str(body.get("text") or ""))
    try:
        out["history"] = [step.to_json() for step in acct.history(record_id)]
    except SoulpassError:  # journal entries are documents: their history is the versions' diffs
        out["history"] = []
    return out


def _superseded_by(acct: Account, version: int, limit: int, in_force: set[str]) -> list[str]:
    """Facts superseded up to ``version`` and not in force then, newest first, each once (the graph
    keeps only facts in force; a rollback may have restored one the log says was superseded, and a
    fact restored and superseded again is in the log twice)."""
    found: dict[str, None] = {}
    for entry in reversed(acct.log()):
        if entry.version > version:
            continue
        for s in entry.superseded:
            fact = str(s.get("fact") or "") if isinstance(s, dict) else ""
            if fact and fact not in in_force:
                found.setdefault(fact)
        if len(found) >= limit:
            break
    return list(found)[:max(limit, 0)]


def fact_graph(acct: Account, at: int | None, subject: str | None = None, limit: int = 500) -> dict[str, Any]:
    """The knowledge graph as of ``at`` as cytoscape elements: entities as nodes, each fact an edge
    labelled by its predicate; facts superseded by then (which the graph itself no longer holds)
    are added from the log and marked. ``subject`` keeps the edges whose source is that entity
    (case-insensitive)."""
    version = acct.check_version(at)
    gks = acct.gks(version)
    want = (subject or "").strip().lower()
    facts: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, Any]] = []
    used: set[str] = set()
    superseded_count = 0
    for n, e in enumerate(gks.edges):
        if want and str(e.source_label).lower() != want:
            continue
        if len(edges) >= limit:
            break
        refs = list(e.fact_refs)
        states = []
        for ref in refs:
            if ref not in facts:
                try:
                    facts[ref] = acct.show(ref, version).model_dump(mode="json")
                except NotFound:
                    facts[ref] = {}
            states.append(facts[ref].get("superseded_by") is not None)
        superseded = bool(states) and all(states)
        edges.append({"data": {"id": f"e{n}", "source": e.source, "target": e.target, "label": e.predicate,
                               "facts": refs, "superseded": superseded},
                      "classes": "superseded" if superseded else ""})
        used.update((e.source, e.target))
        superseded_count += superseded
    by_label = {str(node.label).lower(): node.id for node in gks.nodes}
    extra: dict[str, tuple[str, str]] = {}  # entities only superseded facts name: key -> (node id, label)
    in_force = {ref for ref, body in facts.items() if body and body.get("superseded_by") is None}
    for n, old_id in enumerate(_superseded_by(acct, version, limit - len(edges), in_force)):
        try:
            old = acct.show(old_id, version).model_dump(mode="json")
        except SoulpassError:
            continue
        if old.get("superseded_by") is None:  # restored by a rollback (and outside the subject asked for)
            continue
        if want and str(old.get("subject", "")).lower() != want:
            continue
        ends = []
        for label in (str(old.get("subject", "")), str(old.get("object", ""))):
            node = by_label.get(label.lower())
            if node is None:
                node = extra.setdefault(label.lower(), (f"old{len(extra)}", label))[0]
            ends.append(node)
            used.add(node)
        edges.append({"data": {"id": f"s{n}", "source": ends[0], "target": ends[1], "label": old.get("predicate", ""),
                               "facts": [old_id], "superseded": True}, "classes": "superseded"})
        superseded_count += 1
    nodes = [{"data": {"id": node.id, "label": node.label}} for node in gks.nodes if node.id in used]
    nodes += [{"data": {"id": node, "label": label}} for node, label in extra.values()]
    return {"at": version, "head": acct.head(), "subject": subject or "", "elements": nodes + edges,
            "edges": len(edges), "nodes": len(nodes), "superseded": superseded_count}
