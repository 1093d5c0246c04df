"""Soulpass errors: one root, a shallow tree.

    SoulpassError
    ├── NotFound            an account, sandbox, record, document or version does not exist
    ├── Conflict            the operation clashes with the current state (e.g. sandbox archived)
    ├── InvalidInput        input rejected before anything was stored
    ├── Corrupted           stored data does not parse or violates an invariant
    ├── BackendUnavailable  a server, optional backend or the storage cannot be reached or used
    │   └── StorageFull     the disk (or quota of the file system) is full
    └── ConfigError         a configuration file or value is wrong

Every error carries the ids and paths involved in ``details``, and the two codes it maps to at the
edges: ``exit_code`` (the CLI's exit status) and ``http_status`` (the REST API's status).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendUnavailable",
    "ConfigError",
    "Conflict",
    "Corrupted",
    "InvalidInput",
    "NotFound",
    "SoulpassError",
    "StorageFull",
]


class SoulpassError(Exception):
    """Root of every error Soulpass raises on purpose."""

    exit_code = 1
    http_status = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return self.message


class NotFound(SoulpassError):
    """Something named by the caller does not exist."""

    exit_code = 3
    http_status = 404


class Conflict(SoulpassError):
    """The request clashes with the current state."""

    exit_code = 4
    http_status = 409


class InvalidInput(SoulpassError):
    """Input was rejected; nothing was stored."""

    exit_code = 2
    http_status = 422


class Corrupted(SoulpassError):
    """Stored data is unreadable or inconsistent."""

    exit_code = 5
    http_status = 500


class BackendUnavailable(SoulpassError):
    """A backend (server, optional package) cannot be used."""

    exit_code = 7
    http_status = 503


class StorageFull(BackendUnavailable):
    """The disk holding the store is full: free space, then try again."""

    http_status = 507


class ConfigError(SoulpassError):
    """A configuration value or file is wrong."""

    exit_code = 6
    http_status = 500
