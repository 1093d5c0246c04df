"""Soulpass errors: one root, a shallow tree.

    SoulpassError
    ├── NotFound            an account, sandbox, record, document or version does not exist
    ├── Conflict            the operation clashes with the current state (e.g. sandbox archived)
    ├── InvalidInput        input rejected before anything was stored
    ├── Corrupted           stored data does not parse or violates an invariant
    ├── BackendUnavailable  a server or optional backend cannot be reached or imported
    └── ConfigError         a configuration file or value is wrong

Every error carries the ids and paths involved in ``details``.
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
]


class SoulpassError(Exception):
    """Root of every error Soulpass raises on purpose."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return self.message


class NotFound(SoulpassError):
    """Something named by the caller does not exist."""


class Conflict(SoulpassError):
    """The request clashes with the current state."""


class InvalidInput(SoulpassError):
    """Input was rejected; nothing was stored."""


class Corrupted(SoulpassError):
    """Stored data is unreadable or inconsistent."""


class BackendUnavailable(SoulpassError):
    """A backend (server, optional package) cannot be used."""


class ConfigError(SoulpassError):
    """A configuration value or file is wrong."""
