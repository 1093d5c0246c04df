"""What each operation needs (issue 41): the one place that says which role every HTTP route (the
REST API and the memory browser) and every MCP tool needs, and :func:`require`, the one check.

Roles, from least to most: an ``agent`` key reads, searches, writes to sandboxes and archives or
discards them; an ``owner`` key also changes what is committed by other means (rollback, edit,
forget), takes memory in or out (export, import), manages the account's keys and deletes the
account; an ``admin`` key (no account) does everything in every account and alone makes accounts
and keys. ``public`` needs no key. An account key reaches its own account only, whatever its role
(``deps``); the role says what it may do there.

A route or tool missing from these tables is an error when the app is built (``route_roles``) or
the tool called, so a new one cannot ship without a declared role; the tests walk every route and
tool with every role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from soulpass.server.keys import ApiKey

__all__ = ["ROUTES", "TOOLS", "Needed", "RoleMissing", "RouteRoles", "grants", "held", "require"]

Needed = Literal["public", "agent", "owner", "admin"]
_RANK: dict[str, int] = {"public": 0, "agent": 1, "owner": 2, "admin": 3}

_A = "/v1/accounts/{account}"
_SB = f"{_A}/sandboxes/{{sandbox_id}}"

# (method, path template) -> the role it needs. The browser's pages share the API's keys.
ROUTES: Mapping[tuple[str, str], Needed] = {
    # the schema and its page: no data
    ("GET", "/openapi.json"): "public",
    ("GET", "/docs"): "public",
    # accounts and keys
    ("GET", "/v1/accounts"): "agent",
    ("POST", "/v1/accounts"): "admin",
    ("GET", _A): "agent",
    ("DELETE", _A): "owner",
    ("GET", f"{_A}/keys"): "owner",
    ("POST", f"{_A}/keys"): "admin",
    ("DELETE", f"{_A}/keys/{{key_id}}"): "admin",
    # sandboxes: what an agent does with its session
    ("GET", f"{_A}/sandboxes"): "agent",
    ("POST", f"{_A}/sandboxes"): "agent",
    ("GET", _SB): "agent",
    ("DELETE", _SB): "agent",
    ("GET", f"{_SB}/buffer"): "agent",
    ("POST", f"{_SB}/turns"): "agent",
    ("POST", f"{_SB}/episodes"): "agent",
    ("POST", f"{_SB}/facts"): "agent",
    ("POST", f"{_SB}/states/{{name}}"): "agent",
    ("POST", f"{_SB}/profile"): "agent",
    ("POST", f"{_SB}/core"): "agent",
    ("POST", f"{_SB}/sensory"): "agent",
    ("POST", f"{_SB}/journal"): "agent",
    ("POST", f"{_SB}/archive"): "agent",  # an agent's archive waits for review where the policy says so
    ("GET", f"{_SB}/preview"): "agent",
    ("POST", f"{_SB}/approve"): "owner",
    # a kept sandbox holds what an owner left out of memory: an agent reading it back would undo that
    ("GET", f"{_SB}/history"): "owner",
    ("DELETE", f"{_SB}/history"): "owner",
    ("GET", f"{_A}/reviews"): "agent",
    ("POST", f"{_SB}/search"): "agent",
    ("POST", f"{_SB}/log"): "agent",
    ("GET", f"{_SB}/log"): "agent",
    ("GET", f"{_SB}/clipboard/{{agent}}"): "agent",
    ("POST", f"{_SB}/clipboard/{{agent}}"): "agent",
    ("POST", f"{_SB}/context"): "agent",
    ("POST", f"{_SB}/rag_search"): "agent",
    ("GET", f"{_SB}/inbox/{{agent}}"): "agent",
    ("POST", f"{_SB}/ingest"): "agent",
    # reading what is committed
    ("GET", f"{_A}/versions"): "agent",
    ("GET", f"{_A}/diff"): "agent",
    ("GET", f"{_A}/show/{{ref}}"): "agent",
    ("POST", f"{_A}/search"): "agent",
    ("GET", f"{_A}/records"): "agent",
    ("GET", f"{_A}/records/{{record_id}}"): "agent",
    ("GET", f"{_A}/records/{{record_id}}/history"): "agent",
    ("GET", f"{_A}/journal"): "agent",
    ("GET", f"{_A}/journal/{{entry_id}}"): "agent",
    ("GET", f"{_A}/audit"): "agent",
    # changing what is committed other than by archive, and memory in or out: the owner's
    ("POST", f"{_A}/rollback"): "owner",
    ("PATCH", f"{_A}/records/{{record_id}}"): "owner",
    ("DELETE", f"{_A}/records/{{record_id}}"): "owner",
    ("POST", f"{_A}/forget"): "owner",
    ("GET", f"{_A}/export"): "owner",
    ("POST", f"{_A}/import"): "owner",
    # the memory browser: reading is an agent's, what changes memory an owner's
    ("GET", "/ui"): "agent",
    ("GET", "/ui/"): "agent",
    ("POST", "/ui/login"): "public",
    ("POST", "/ui/logout"): "public",
    ("GET", "/ui/a/{account}"): "agent",
    ("GET", "/ui/a/{account}/v/{version}"): "agent",
    ("GET", "/ui/a/{account}/diff"): "agent",
    ("GET", "/ui/a/{account}/r/{record_id}"): "agent",
    ("GET", "/ui/a/{account}/search"): "agent",
    ("GET", "/ui/a/{account}/graph"): "agent",
    ("GET", "/ui/a/{account}/agents"): "agent",
    ("GET", "/ui/a/{account}/health"): "agent",
    ("GET", "/ui/a/{account}/sandboxes"): "agent",
    ("GET", "/ui/a/{account}/sandboxes/{sandbox_id}"): "owner",  # the review page: what an owner approves
    ("POST", "/ui/a/{account}/sandboxes/{sandbox_id}/approve"): "owner",
    ("POST", "/ui/a/{account}/sandboxes/{sandbox_id}/discard"): "owner",
    ("POST", "/ui/a/{account}/rollback"): "owner",
    ("POST", "/ui/a/{account}/forget"): "owner",
}

# MCP tool -> the role it needs over HTTP (over stdio the server acts for the local user: every right).
TOOLS: Mapping[str, Needed] = {
    "rag_search": "agent",
    "remember": "agent",
    "manage_clipboard": "agent",
    "get_context": "agent",
    "create_sandbox": "agent",
    "archive_session": "agent",
    "preview_archive": "agent",
    "approve_archive": "owner",  # approves what the review policy holds, and excludes
    "discard_session": "agent",
    "memory_log": "agent",
    "get_memory": "agent",
    "list_memories": "agent",
    "search_memory": "agent",
    "memory_diff": "agent",
    "memory_history": "agent",
    "read_identity": "agent",
    "propose_core": "agent",
    "update_profile": "agent",
    "add_journal_entry": "agent",  # adds one entry as a version of its own: it changes nothing committed
    "rollback_memory": "owner",
    "edit_memory": "owner",
    "forget_memory": "owner",
    "delete_account": "owner",
    "export_account": "owner",
    "import_memories": "owner",
}


def held(key: ApiKey) -> Needed:
    """The role a key holds: ``admin`` for an admin key, else its own."""
    return "admin" if key.admin else key.role


def grants(key: ApiKey, needed: Needed) -> bool:
    """Whether ``key`` may do what needs ``needed`` (a higher role may do what a lower one may)."""
    return _RANK[held(key)] >= _RANK[needed]


class RoleMissing(Exception):
    """A valid key whose role does not allow the operation (403); the message names both roles."""

    def __init__(self, what: str, needed: Needed, key: ApiKey) -> None:
        super().__init__(f"{what} needs {_article(needed)} {needed} key; this key ({key.key_id}) is "
                         f"{_article(held(key))} {held(key)} key")
        self.what, self.needed, self.held = what, needed, held(key)


def _article(role: str) -> str:
    return "an" if role[0] in "aeiou" else "a"


def require(key: ApiKey, needed: Needed, what: str) -> None:
    """The one check: ``RoleMissing`` unless ``key`` holds ``needed`` (or more). ``what`` names
    the operation for the message (``POST /v1/accounts/{account}/rollback``, ``the tool forget_memory``)."""
    if not grants(key, needed):
        raise RoleMissing(what, needed, key)


@dataclass(frozen=True)
class RouteRoles:
    """The role each endpoint of an app needs, found once when the app is built."""

    by_endpoint: Mapping[Callable[..., Any], tuple[str, Needed]]

    @classmethod
    def of(cls, routes: Iterator[tuple[str, str, Callable[..., Any]]]) -> RouteRoles:
        """From the app's (method, path template, endpoint) triples; a route ``ROUTES`` does not
        name is a ``LookupError`` naming it (declare it above)."""
        found: dict[Callable[..., Any], tuple[str, Needed]] = {}
        for method, path, endpoint in routes:
            needed = ROUTES.get((method, path))
            if needed is None:
                raise LookupError(f"{method} {path} has no role: declare the role it needs in "
                                  "soulpass/server/roles.py (ROUTES)")
            if endpoint in found and found[endpoint][1] != needed:
                raise LookupError(f"{method} {path} shares its endpoint with {found[endpoint][0]}, "
                                  f"which needs another role")
            found.setdefault(endpoint, (f"{method} {path}", needed))
        return cls(found)

    def check(self, key: ApiKey, endpoint: Callable[..., Any]) -> None:
        """``require`` the role the route of ``endpoint`` needs."""
        what, needed = self.by_endpoint[endpoint]
        require(key, needed, what)
