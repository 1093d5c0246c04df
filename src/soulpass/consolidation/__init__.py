"""Consolidation: pure planning of what a session adds to the master, by per-type rules."""
