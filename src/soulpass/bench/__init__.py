"""Benchmarks that run through the public engine (``soulpass bench …``)."""
