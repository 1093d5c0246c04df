"""The catalog: one SQLite row per stored copy of a record or document, with FTS5 over its text.

Derived from the store and rebuildable from it; it follows the store version by version.
"""

from .catalog import (
    DEFAULT_FULLTEXT,
    Catalog,
    CatalogStatus,
    CatchUpReport,
    FullText,
    catalog_file,
    catalog_path,
    catch_up,
    remove_catalog,
)
from .query import Filters, fts_query, passes, query_terms
from .rows import CatalogRow

__all__ = [
    "DEFAULT_FULLTEXT",
    "Catalog",
    "CatalogRow",
    "CatalogStatus",
    "CatchUpReport",
    "Filters",
    "FullText",
    "catalog_file",
    "catalog_path",
    "catch_up",
    "fts_query",
    "passes",
    "query_terms",
    "remove_catalog",
]
