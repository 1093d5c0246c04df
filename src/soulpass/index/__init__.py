"""The derived index: a SQLite catalog with full text, and vectors. Rebuildable from the files."""
