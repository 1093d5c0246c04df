"""The files backend: today's on-disk layout, commit protocol, recovery, history copies and
session buffers, and every byte of serialisation (JSON, Markdown). Only ``soulpass.store`` imports it."""
