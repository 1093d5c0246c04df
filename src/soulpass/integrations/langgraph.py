"""LangGraph on Soulpass (extra ``langgraph``): ``SoulpassStore``, a ``BaseStore``.

A namespace's first label names the account (made at its first put), so LangGraph's usual
``(user_id, "memories")`` gives each user an account of their own. An item is the state document
``lg.<digest of namespace and key>`` of that account (namespace, key, value, creation time): ``get``
reads it, a delete marks it deleted. What a put indexes (the whole value, or the fields it names)
is also a sensory record of the account, ``source`` ``langgraph:<document>``: ``search`` with a
query is the account's hybrid search over those records, each hit read back as the item it came
from while that item still holds the text. Every batch of puts to an account is one sandbox
archived as one version (history keeps the values it replaced)::

    store = SoulpassStore(soulpass.open("~/.soulpass"))
    graph = builder.compile(store=store)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from soulpass import Account, BackendUnavailable, NotFound, SensoryRecord, Soulpass, StateBlob
from soulpass.index.relevance import relevance

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:
    raise BackendUnavailable("soulpass.integrations.langgraph needs LangGraph: pip install 'soulpass[langgraph]'",
                             extra="langgraph") from exc

__all__ = ["ITEM_PREFIX", "SoulpassStore", "item_state_name"]

ITEM_PREFIX = "lg."
_SOURCE = "langgraph:"  # a sensory record's source: the item document it indexes
_SANDBOX = "langgraph store"


def item_state_name(namespace: tuple[str, ...], key: str) -> str:
    """The state document that holds an item (a digest: labels and keys may be any text)."""
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()[:40]
    return ITEM_PREFIX + digest


class SoulpassStore(BaseStore):
    """A LangGraph store whose namespaces are Soulpass accounts (first label) and whose items are
    versioned documents in them. Safe to share between threads; ``abatch`` runs ``batch`` on a thread."""

    supports_ttl = False

    def __init__(self, sp: Soulpass) -> None:
        self.sp = sp
        self._accounts: dict[str, Account] = {}  # one handle per account: its index stays open
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release the accounts' indexes."""
        with self._lock:
            for account in self._accounts.values():
                account.close()
            self._accounts.clear()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}  # written together, before the next read
        for op in ops:
            if isinstance(op, PutOp):
                puts.pop((op.namespace, op.key), None)
                puts[(op.namespace, op.key)] = op  # the last put of a key wins, as in LangGraph's own stores
                results.append(None)
                continue
            self._write(puts.values())
            puts.clear()
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {op!r}")
        self._write(puts.values())
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- accounts --------------------------------------------------------------------------

    def _account(self, name: str, *, create: bool = False) -> Account | None:
        with self._lock:
            account = self._accounts.get(name)
            if account is None:
                try:
                    account = self.sp.account(name, create=create)
                except NotFound:
                    return None
                self._accounts[name] = account
            return account

    def _scope(self, prefix: tuple[str, ...]) -> Iterator[Account]:
        """The accounts a namespace prefix reaches: the one it names, or every account."""
        for name in prefix[:1] or tuple(self.sp.accounts()):
            account = self._account(name)
            if account is not None:
                yield account

    # --- operations ------------------------------------------------------------------------

    def _write(self, puts: Iterable[PutOp]) -> None:
        by_account: dict[str, list[PutOp]] = {}
        for op in puts:
            if not op.namespace:
                raise ValueError("a namespace needs at least one label: the first names the account")
            by_account.setdefault(op.namespace[0], []).append(op)
        for name, ops in by_account.items():
            account = self._account(name, create=True)
            assert account is not None  # made when missing
            sandbox = None
            now = datetime.now(UTC).isoformat()
            for op in ops:
                state = item_state_name(op.namespace, op.key)
                old = _live(account.state(state))
                text = "" if op.value is None else _indexed_text(op.value, op.index)
                if op.value is None:
                    delta: dict[str, Any] | None = {"value": None, "text": "", "deleted": True} if old else None
                elif old is not None and (old.data["value"], old.data["text"]) == (op.value, text):
                    delta = None  # the same again: no version
                else:
                    created = old.data["created_at"] if old is not None else now
                    delta = {"namespace": list(op.namespace), "key": op.key, "value": op.value, "text": text,
                             "created_at": created, "deleted": False}
                if delta is not None:
                    sandbox = sandbox or account.create_sandbox(_SANDBOX)
                    sandbox.update_state(state, delta)
                    if text:
                        sandbox.add_sensory(text, source=_SOURCE + state)
            if sandbox is not None:
                sandbox.archive()

    def _get(self, op: GetOp) -> Item | None:
        account = self._account(op.namespace[0]) if op.namespace else None
        if account is None:
            return None
        blob = _live(account.state(item_state_name(op.namespace, op.key)))
        return None if blob is None else _item(blob)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        accounts = list(self._scope(op.namespace_prefix))
        wanted = op.offset + op.limit
        found: list[SearchItem] = []
        for account in accounts:
            if op.query:
                found += self._ranked(account, op, wanted)
            else:
                found += [_search_item(blob) for blob in account.states().values()
                          if _is_item(blob) and _chosen(blob, op)]
        if op.query:
            if len(accounts) > 1:  # each account ranks its own; relevance reads alike across them
                found.sort(key=lambda item: item.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda item: item.updated_at, reverse=True)
        return found[op.offset:wanted]

    def _ranked(self, account: Account, op: SearchOp, wanted: int) -> list[SearchItem]:
        """The best ``wanted`` items of a hybrid search, asking for more hits while the namespace
        and filter leave too few of them."""
        assert op.query is not None
        k = max(2 * wanted, 20)
        while True:
            hits = account.search(op.query, k=k, kinds=("sensory",))
            found, seen = [], set()
            for hit in hits:
                record = account.record(hit.id)
                source = record.source if isinstance(record, SensoryRecord) else None
                if source is None or not source.startswith(_SOURCE) or source in seen:
                    continue
                blob = _live(account.state(source.removeprefix(_SOURCE)))
                if blob is not None and blob.data["text"] == record.text and _chosen(blob, op):
                    seen.add(source)  # an older value's record of the item is passed over, not this
                    found.append(_search_item(blob, relevance(op.query, hit)))
            if len(found) >= wanted or len(hits) < k:
                return found[:wanted]
            k *= 4

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces: set[tuple[str, ...]] = set()
        for account in self._scope(()):
            for blob in account.states().values():
                if _is_item(blob) and not blob.data.get("deleted"):
                    namespace = tuple(blob.data["namespace"])
                    if all(_matches_namespace(condition, namespace) for condition in op.match_conditions or ()):
                        namespaces.add(namespace[:op.max_depth] if op.max_depth is not None else namespace)
        return sorted(namespaces)[op.offset:op.offset + op.limit]


# --- items ------------------------------------------------------------------------------------


def _is_item(blob: StateBlob) -> bool:
    return blob.name.startswith(ITEM_PREFIX) and "namespace" in blob.data


def _live(blob: StateBlob | None) -> StateBlob | None:
    """The item's document, or None when there is none or it is deleted."""
    return None if blob is None or blob.data.get("deleted") else blob


def _item(blob: StateBlob) -> Item:
    data = blob.data
    return Item(value=data["value"], key=data["key"], namespace=tuple(data["namespace"]),
                created_at=datetime.fromisoformat(data["created_at"]),
                updated_at=blob.key_times.get("value", blob.updated_at))


def _search_item(blob: StateBlob, score: float | None = None) -> SearchItem:
    item = _item(blob)
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


def _indexed_text(value: Mapping[str, Any], fields: Literal[False] | list[str] | None) -> str:
    """What a search finds an item by: ``key: value`` lines of the whole value, or of the fields
    (dotted paths) ``put(index=[...])`` names; nothing for ``index=False``."""
    if fields is False:
        return ""
    if fields is None:
        return "\n".join(_lines(value))
    chosen: list[str] = []
    for path in fields:
        part: Any = value
        for step in path.split("."):
            part = part.get(step) if isinstance(part, dict) else None
        chosen += _lines(part, path.rsplit(".", 1)[-1])
    return "\n".join(chosen)


def _lines(value: Any, key: str = "") -> list[str]:
    if isinstance(value, dict):
        return [line for k, v in value.items() for line in _lines(v, str(k))]
    if isinstance(value, list | tuple):
        return [line for v in value for line in _lines(v, key)]
    if value is None or value == "":
        return []
    return [f"{key}: {value}" if key else str(value)]


def _chosen(blob: StateBlob, op: SearchOp) -> bool:
    """In force, under the search's namespace prefix, and matching its filter."""
    data = blob.data
    if data.get("deleted") or tuple(data["namespace"][:len(op.namespace_prefix)]) != op.namespace_prefix:
        return False
    return all(_compare(data["value"].get(key), wanted) for key, wanted in (op.filter or {}).items())


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _compare(actual: Any, wanted: Any) -> bool:
    """LangGraph's filter: equality (nested objects key by key) or ``{"$op": operand, ...}``."""
    if isinstance(wanted, dict):
        if any(key.startswith("$") for key in wanted):
            unknown = set(wanted) - set(_OPERATORS)
            if unknown:
                raise ValueError(f"unknown filter operator(s) {sorted(unknown)}; known: {sorted(_OPERATORS)}")
            try:
                return all(_OPERATORS[key](actual, operand) for key, operand in wanted.items())
            except TypeError:  # values of kinds that do not compare (a string against a number)
                return False
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    return bool(actual == wanted)


def _matches_namespace(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    labels = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(want in ("*", have) for have, want in zip(labels, path, strict=True))
