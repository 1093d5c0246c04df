"""The error answers every endpoint may give, for the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from soulpass.server.models import ErrorOut

__all__ = ["ERRORS"]

_WHY = {
    400: "The body is not valid JSON",
    401: "No API key, or not a valid one",
    403: "The key does not reach this account, or an admin key is needed, or the key may not approve",
    404: "The account, sandbox, record or version does not exist",
    409: "The request clashes with the current state (e.g. the sandbox was archived)",
    413: "The request body is over the server's limit",
    422: "The input was rejected; nothing was stored",
}

ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut, "description": why} for code, why in _WHY.items()}
