"""Tuning constants more than one part of the index reads, defined once."""

from __future__ import annotations

from soulpass.vectors.base import SAVE_MIN_ROWS

__all__ = ["SAVE_MIN_ROWS"]

# The index saves its own derived state (the catalog's filter columns, the vector row -> catalog row
# map) by the vector store's rule: rebuilt in memory below SAVE_MIN_ROWS rows, saved from there on
# and again each time it grows by a quarter. One rule, defined in the vector store.
