"""Arguments of the library API checked before a call runs (loads no pydantic: a search that
needs no record model must not pay for importing it)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from soulpass.errors import InvalidInput
from soulpass.store.fsio import check_depth

__all__ = ["string_list", "bounded_arguments", "strings"]

T = TypeVar("T")
R = TypeVar("R")

_NESTED = (dict, list, tuple, set, frozenset)


def bounded_arguments(cls: type[T]) -> type[T]:
    """Class decorator for the library API: every public method refuses an argument nested more
    than ``MAX_JSON_DEPTH`` levels (``InvalidInput`` naming it) before it runs, so no hostile value
    reaches code (a message's ``repr``, pydantic, JSON) that would recurse until RecursionError."""
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
        return method(*args, **kwargs)

    return checked


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
    return items
