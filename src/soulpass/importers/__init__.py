"""Importers: memories from other formats taken into an account. Each yields items and reports the
ones it cannot take (:class:`~soulpass.importers.base.Failure`) instead of stopping: ``mira`` (a Mira
folder of Markdown entries), ``locomo`` (conversations in the LoCoMo layout, BEAM included)."""

from soulpass.importers.base import Failure, Importer, failure, split

__all__ = ["Failure", "Importer", "failure", "split"]
