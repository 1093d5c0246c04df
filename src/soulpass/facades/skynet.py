"""``MemoryManager``: the SKYNET-SAFE memory API (seed 002), with its names, as a thin view over the engine.

The seed's two ChromaDB collections become records of one account:

* a user message is a ``TurnUser`` tagged ``user_message``; its agent is the sender made into a
  valid name, and the exact sender is kept in the tag ``sender:<sender>``;
* a system response is a ``TurnLLM`` by agent ``system`` tagged ``system_response``, whose
  ``reply_to`` is the id of the stored user message it answers (also tagged ``reply_to:<id>``,
  so the catalog finds a message's answer without reading every response file);
* a system reflection is a ``TurnLLM`` by ``system`` in epistemic mode ``reflect``, tagged
  ``system_reflection``.

Every ``store_*`` call writes through its own sandbox and archives it at once: each stored item is
one committed version, durable and visible to search immediately. ``save_state`` therefore only
brings the derived index (catalog and vectors) up to HEAD.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import ValidationError

from soulpass.engine import Account, Committed, EmbedderChoice, Soulpass
from soulpass.errors import ConfigError, Conflict, InvalidInput
from soulpass.ids import MAX_NAME_LENGTH, check_name, new_temp_id
from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.contract import SearchCatalog
from soulpass.index.search import Hit
from soulpass.records import EPOCH, TurnLLM, TurnUser
from soulpass.vectors import VectorBackend

__all__ = ["MemoryManager", "Stored"]

log = logging.getLogger(__name__)

CONFIG_KEYS = ("account", "embedding_model", "memory_path", "vector_db_type")
VECTOR_DB_TYPES: dict[str, VectorBackend] = {"default": "hnsw", "hnsw": "hnsw", "exact": "exact", "chroma": "chroma"}
EMBEDDING_MODELS = ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2")  # the embedded MiniLM
DEFAULT_ACCOUNT = "skynet"

USER_MESSAGE, SYSTEM_RESPONSE, SYSTEM_REFLECTION = "user_message", "system_response", "system_reflection"
SYSTEM = "system"
UNKNOWN_SENDER = "unknown"  # the seed's default sender
SENDER_TAG, REPLY_TAG = "sender:", "reply_to:"
REFLECTION_SHARE = 2 / 5  # the seed's "2:5 ratio" of reflections to interactions

_T = TypeVar("_T", TurnUser, TurnLLM)
_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Stored:
    """Where a ``store_*`` call put its item: the record id and the version that committed it.

    For a response, ``reply_to`` is the id of the user message it answers, or None when no
    stored message matched (the response is then stored unlinked and a warning is logged).
    """

    id: str
    version: int
    reply_to: str | None = None


@dataclass(frozen=True)
class _Message:
    content: str
    sender: str
    created_at: datetime | None  # None: the message carried no timestamp


class MemoryManager:
    """SKYNET-SAFE long-term memory, seed API. ``config`` is the seed's memory config:

    * ``memory_path`` (required): the Soulpass home folder;
    * ``vector_db_type``: ``"chroma"`` (a real ChromaDB index) or ``"default"`` (Soulpass's own
      HNSW index; also ``"hnsw"``, ``"exact"``); missing means ``"default"``;
    * ``embedding_model``: ``"sentence-transformers/all-MiniLM-L6-v2"`` (or ``"all-MiniLM-L6-v2"``),
      the embedded offline MiniLM, loaded at once (``BackendUnavailable`` names the extra to
      install); missing means "MiniLM when installed, else full-text search only";
    * ``account``: the account the memories go to (default ``"skynet"``).

    Unknown keys raise ``ConfigError`` listing the known ones: a misspelt ``vector_db_type`` would
    otherwise silently choose another backend. Pass the memory section of a larger config only.

    The vector index folder is locked while the manager is open: call :meth:`close` (or use it as
    a context manager) before opening another manager on the same ``memory_path``.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        home, backend, embedder, account = _parse_config(config)
        self.engine = Soulpass(home, embedder=embedder, vector_backend=backend)
        self.account: Account = self.engine.account(account, create=True)
        self._closed = False

    # --- storing ---------------------------------------------------------------------------

    def store_interaction(self, message: Mapping[str, Any]) -> Stored:
        """Store a user message ``{"sender", "content", "timestamp"}`` (epoch seconds; now if missing).

        Only ``content`` is required (a non-empty string); other keys are ignored.
        """
        msg = _message(message, "")
        self._check_open()
        tags = (USER_MESSAGE, SENDER_TAG + msg.sender)
        when = {} if msg.created_at is None else {"created_at": msg.created_at}
        turn = _turn(TurnUser, text_excerpt=msg.content, agent=_agent_name(msg.sender), tags=tags, **when)
        return self._commit(turn, "message")

    def store_response(self, response: str, original_message: Mapping[str, Any]) -> Stored:
        """Store a system response linked (``reply_to``) to the stored user message it answers.

        The message is found by content, sender and timestamp (by content and sender, newest
        unanswered first, when it has no timestamp). No match: stored unlinked, with a warning.
        """
        text = _text(response, "response")
        original = _message(original_message, "original_message.")
        self._check_open()
        reply_to = self._find_message(original)
        tags: tuple[str, ...] = (SYSTEM_RESPONSE,)
        if reply_to is None:
            log.warning("no stored user message matches the original message of this response "
                        "(sender %r); storing the response unlinked", original.sender)
        else:
            tags += (REPLY_TAG + reply_to,)
        turn = _turn(TurnLLM, text_excerpt=text, agent=SYSTEM, reply_to=reply_to, tags=tags)
        stored = self._commit(turn, "response")
        return Stored(stored.id, stored.version, reply_to)

    def store_reflection(self, reflection: str) -> Stored:
        """Store a system reflection on its own performance."""
        text = _text(reflection, "reflection")
        self._check_open()
        turn = _turn(TurnLLM, text_excerpt=text, agent=SYSTEM, epistemic_mode="reflect", tags=(SYSTEM_REFLECTION,))
        return self._commit(turn, "reflection")

    def _commit(self, turn: TurnUser | TurnLLM, what: str) -> Stored:
        sandbox = self.account.create_sandbox(f"skynet {what}")
        try:
            temp_id = sandbox.write_turn(turn)
        except BaseException:
            sandbox.discard()
            raise
        result = sandbox.archive()
        if not isinstance(result, Committed):  # a fresh sandbox, no dry run: always committed
            raise AssertionError(f"archiving sandbox {sandbox.id} returned {result!r}")
        return Stored(result.plan.id_map[temp_id], result.version)

    # --- retrieving ------------------------------------------------------------------------

    def retrieve_relevant_context(self, query: str, n_results: int = 5) -> list[dict[str, Any]]:
        """Hybrid search: the ``n_results`` best interactions, then the best reflections (2 per 5).

        Each document is ``{"id", "content", "metadata": {"source", "timestamp", "type"},
        "score", "is_reflection"}``; each list is best first.
        """
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string, not {type(query).__name__}", field="query")
        _check_count(n_results, "n_results")
        self._check_open()
        interactions = self.account.search(query, n_results, kinds=("turn_user", "turn_llm"),
                                           tags=(USER_MESSAGE, SYSTEM_RESPONSE))
        n_reflections = round(n_results * REFLECTION_SHARE)
        reflections = self.account.search(query, n_reflections, kinds=("turn_llm",),
                                          tags=(SYSTEM_REFLECTION,)) if n_reflections else []
        return [_document(h, h.row) for h in (*interactions, *reflections) if h.row is not None]

    def retrieve_last_interactions(self, n: int = 5) -> list[dict[str, Any]]:
        """The ``n`` latest user messages (by timestamp, newest first), each with its response.

        Each is ``{"id", "content", "metadata", "response"}``; ``response`` is the text of the
        first response linked to the message, ``""`` when none is.
        """
        _check_count(n, "n")
        catalog = self._catalog()
        messages = catalog.get(catalog.ids_matching(Filters(kinds=("turn_user",), tags=(USER_MESSAGE,))))
        newest = sorted(messages, key=lambda r: (_when(r), r.id), reverse=True)[:n]
        answers = _responses(catalog, [r.id for r in newest])
        return [{"id": r.id, "content": r.text, "metadata": _metadata(r),
                 "response": answers[r.id].text if r.id in answers else ""} for r in newest]

    # --- persistence -----------------------------------------------------------------------

    def save_state(self) -> None:
        """Bring the index up to HEAD. Every stored item is already committed to disk; idempotent."""
        self._catalog()

    def close(self) -> None:
        """Release the index (and its folder lock); idempotent. The manager cannot be used after."""
        if not self._closed:
            self.account.close()
            self._closed = True

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # --- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise Conflict(f"this MemoryManager on {self.engine.home} is closed", path=str(self.engine.home))

    def _catalog(self) -> SearchCatalog[Any]:
        self._check_open()
        return self.account.index().catalog

    def _find_message(self, msg: _Message) -> str | None:
        """The id of the stored user message ``msg`` describes, or None."""
        catalog = self._catalog()
        since = until = None
        if msg.created_at is not None:  # event times are kept to the microsecond: an exact match
            since, until = msg.created_at, msg.created_at + timedelta(microseconds=1)
        ids = catalog.ids_matching(Filters(kinds=("turn_user",), tags=(SENDER_TAG + msg.sender,),
                                           since=since, until=until))
        rows = [r for r in catalog.get(ids) if r.text == msg.content]
        if not rows:
            return None
        answered = _responses(catalog, [r.id for r in rows])
        best = max(rows, key=lambda r: (r.id not in answered, _when(r), r.id))
        return best.id


# --- config and input ----------------------------------------------------------------------


def _parse_config(config: object) -> tuple[Path, VectorBackend, EmbedderChoice, str]:
    if not isinstance(config, Mapping):
        raise ConfigError(f"the memory config must be a dict, not {type(config).__name__}")
    unknown = sorted(str(k) for k in config if k not in CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown memory config keys: {', '.join(unknown)} (known: {', '.join(CONFIG_KEYS)})",
                          keys=unknown)
    path = config.get("memory_path")
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise ConfigError("config key 'memory_path' is required: the folder the memory is kept in",
                          key="memory_path")
    account = config.get("account", DEFAULT_ACCOUNT)
    try:
        check_name(account, "account")
    except InvalidInput as exc:
        raise ConfigError(f"config key 'account': {exc.message}", key="account") from exc
    db_type = config.get("vector_db_type", "default")
    if not isinstance(db_type, str) or db_type not in VECTOR_DB_TYPES:
        raise ConfigError(f"config key 'vector_db_type' is {db_type!r}; allowed: {', '.join(VECTOR_DB_TYPES)}",
                          key="vector_db_type")
    model = config.get("embedding_model")
    embedder: EmbedderChoice = "auto"
    if model is not None:
        if not isinstance(model, str) or model not in EMBEDDING_MODELS:
            raise ConfigError(f"config key 'embedding_model' is {model!r}; available offline: "
                              f"{', '.join(EMBEDDING_MODELS)}", key="embedding_model")
        from soulpass.embed.minilm import MiniLM  # needs the 'embed' extra: imported only when asked for

        embedder = MiniLM()
    return Path(path), VECTOR_DB_TYPES[db_type], embedder, account


def _message(message: object, prefix: str) -> _Message:
    """The seed's message dict, checked; ``prefix`` names it in errors (``original_message.``)."""
    if not isinstance(message, Mapping):
        raise InvalidInput(f"{prefix.rstrip('.') or 'message'} must be a dict with 'content' (and 'sender', "
                           f"'timestamp'), not {type(message).__name__}", field=prefix.rstrip(".") or "message")
    content = _text(message.get("content"), prefix + "content")
    sender = message.get("sender", UNKNOWN_SENDER)
    if isinstance(sender, int) and not isinstance(sender, bool):
        sender = str(sender)  # numeric user ids are common in chat systems
    if not isinstance(sender, str) or not sender.strip():
        raise InvalidInput(f"{prefix}sender must be a non-empty string, not {sender!r}", field=prefix + "sender")
    return _Message(content, sender, _time(message.get("timestamp"), prefix + "timestamp"))


def _text(value: object, field: str) -> str:
    if value is None:
        raise InvalidInput(f"{field} is missing", field=field)
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string, not {type(value).__name__}", field=field)
    if not value.strip():
        raise InvalidInput(f"{field} is empty", field=field)
    return value


def _time(value: object, field: str) -> datetime | None:
    """Epoch seconds as an aware UTC datetime (None when missing)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{field} must be epoch seconds (a number), not {type(value).__name__}", field=field)
    if not math.isfinite(value):
        raise InvalidInput(f"{field} must be a finite number, not {value!r}", field=field)
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise InvalidInput(f"{field} {value!r} is out of range: {exc}", field=field) from exc


def _turn(model: type[_T], **fields: Any) -> _T:
    """A new turn with a temporary id, checked before any sandbox exists (nothing to clean up)."""
    try:
        return model(id=new_temp_id(model.model_fields["kind"].default), **fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or model.__name__
        raise InvalidInput(f"{model.__name__} rejected {where}: {err['msg']}", field=where) from exc


def _agent_name(sender: str) -> str:
    """``sender`` made into a valid agent name (the exact sender is kept in a tag)."""
    name = _NOT_NAME.sub("_", sender).lstrip("._-")
    name = re.sub(r"\.{2,}", ".", name)[:MAX_NAME_LENGTH]
    return check_name(name or UNKNOWN_SENDER, "agent")


def _check_count(value: object, field: str) -> None:
    if type(value) is not int or value < 1:
        raise InvalidInput(f"{field} must be a positive integer, not {value!r}", field=field)


# --- catalog rows as the seed's documents ----------------------------------------------------


def _when(row: CatalogRow) -> datetime:
    return row.event_time or EPOCH


def _responses(catalog: SearchCatalog[Any], message_ids: list[str]) -> dict[str, CatalogRow]:
    """The first response (by time) linked to each of ``message_ids``, by message id."""
    if not message_ids:
        return {}
    rows = catalog.get(catalog.ids_matching(
        Filters(kinds=("turn_llm",), tags=tuple(REPLY_TAG + i for i in message_ids))))
    first: dict[str, CatalogRow] = {}
    for row in sorted(rows, key=lambda r: (_when(r), r.id)):
        for tag in row.tags:
            if tag.startswith(REPLY_TAG):
                first.setdefault(tag.removeprefix(REPLY_TAG), row)
    return first


def _metadata(row: CatalogRow) -> dict[str, Any]:
    """The seed's metadata: ``source`` (the sender, or "system"), ``timestamp`` (epoch seconds), ``type``."""
    kind = next((t for t in row.tags if t in (USER_MESSAGE, SYSTEM_RESPONSE, SYSTEM_REFLECTION)),
                USER_MESSAGE if row.kind == "turn_user" else SYSTEM_RESPONSE)
    source = SYSTEM
    if kind == USER_MESSAGE:
        source = next((t.removeprefix(SENDER_TAG) for t in row.tags if t.startswith(SENDER_TAG)),
                      row.agent or UNKNOWN_SENDER)
    return {"source": source, "timestamp": _when(row).timestamp(), "type": kind}


def _document(hit: Hit, row: CatalogRow) -> dict[str, Any]:
    metadata = _metadata(row)
    return {"id": hit.id, "content": hit.text, "metadata": metadata, "score": hit.score,
            "is_reflection": metadata["type"] == SYSTEM_REFLECTION}
