"""Who may approve what the review policy (``rules: review``) holds for a person (issue 41).

The one place the REST API and MCP over HTTP ask; the library takes the answer as
``Account.archive(may_approve=...)``.
"""

from __future__ import annotations

from soulpass.server.keys import ApiKey

__all__ = ["approver", "may_approve"]


def may_approve(key: ApiKey) -> bool:
    """Whether ``key`` may approve held items and exclude items from an archive. An admin key
    may; an account key may until keys carry roles: then an owner key may and an agent key not
    (key roles: point this at the key's role when they are merged)."""
    return key.admin or key.account is not None


def approver(key: ApiKey) -> str:
    """How the version entry names who archived: the key's label and id."""
    return f"{key.label} ({key.key_id})" if key.label else key.key_id
