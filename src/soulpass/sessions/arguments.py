"""The library API's boundary: arguments checked before a call runs, and a failing disk or file
system reported as a Soulpass error (loads no pydantic: a search that needs no record model must
not pay for importing it)."""

from __future__ import annotations

import errno
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from soulpass.errors import BackendUnavailable, InvalidInput, StorageFull
from soulpass.store.fsio import check_depth

__all__ = ["check_text", "library_boundary", "string_list", "strings"]

T = TypeVar("T")
R = TypeVar("R")

_NESTED = (dict, list, tuple, set, frozenset)


def library_boundary(cls: type[T]) -> type[T]:
    """Class decorator for the library API. Every public method refuses an argument nested more
    than ``MAX_JSON_DEPTH`` levels (``InvalidInput`` naming it) before it runs, so no hostile value
    reaches code (a message's ``repr``, pydantic, JSON) that would recurse until RecursionError;
    and an ``OSError`` that escapes it (a full disk, an I/O error, a home that is not a folder)
    becomes ``StorageFull`` (a full disk) or ``BackendUnavailable`` naming the file and the error."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _bounded(member))
    return cls


def _bounded(method: Callable[..., R]) -> Callable[..., R]:
    names = list(inspect.signature(method).parameters)

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> R:
        for i, value in enumerate(args[1:], 1):
            if isinstance(value, _NESTED):
                check_depth(value, names[i] if i < len(names) else f"argument {i}")
        for key, value in kwargs.items():
            if isinstance(value, _NESTED):
                check_depth(value, key)
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            raise _storage_error(method.__name__, exc) from exc

    return checked


def _storage_error(call: str, exc: OSError) -> BackendUnavailable:
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    where = f" ({exc.filename})" if exc.filename else ""
    kind = StorageFull if full else BackendUnavailable
    return kind(f"{call}: {'the disk is full' if full else 'the store cannot be read or written'}{where}: "
                f"{exc.strerror or exc}", path=exc.filename, errno=errno.errorcode.get(exc.errno or 0, exc.errno))


def string_list(values: Any, field: str) -> tuple[Any, ...]:
    """``values`` as a tuple; one string is refused, not split into one-letter items."""
    if isinstance(values, str | bytes):
        raise InvalidInput(f"{field} must be a list of strings, not one string ({values!r:.40})", field=field)
    try:
        return tuple(values)
    except TypeError:
        raise InvalidInput(f"{field} must be a list of strings, not {type(values).__name__}", field=field) from None


def strings(values: Any, field: str, *, one: bool = False) -> tuple[str, ...]:
    """``values`` as a tuple of strings, each checked; with ``one``, a lone string is the one value
    (``kinds="fact"``), else it is refused as :func:`string_list` does."""
    if one and isinstance(values, str):
        return (values,)
    items = string_list(values, field)
    for item in items:
        if not isinstance(item, str):
            raise InvalidInput(f"{field} must hold strings, not {type(item).__name__}", field=field)
        check_text(item, field)
    return items


def check_text(value: str, field: str) -> str:
    """``value`` when it can be stored (valid UTF-8: no lone surrogates); ``InvalidInput`` else."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{field} is not valid UTF-8 ({exc.reason} at position {exc.start})",
                               field=field) from None
    return value
