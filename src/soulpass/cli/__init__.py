"""The ``soulpass`` command line: a thin adapter over the library, grouped by noun."""
