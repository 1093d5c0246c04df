"""Tuning constants more than one part of the index reads, defined once."""

from __future__ import annotations

__all__ = ["SAVE_MIN_ROWS"]

# Derived state of fewer rows (the catalog's filter columns, the vectors' sign bits, the vector row ->
# catalog row map) is rebuilt in memory when needed, not written to disk: building it costs next to
# nothing. From this size on it is saved, and again each time its rows grow by a quarter.
SAVE_MIN_ROWS = 16_384
