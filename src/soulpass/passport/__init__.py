"""The passport: one account as one verified zip file (docs/passport.md).

``export_account`` writes it from ``AccountBackend.source_files`` inside ``exclusive``;
``import_account`` checks every entry before ``Backend.restore`` makes the account, all or nothing.
"""

from soulpass.passport.export import ExportResult, export_account
from soulpass.passport.format import FORMAT_VERSION, MAX_ENTRY_BYTES, MAX_TOTAL_BYTES
from soulpass.passport.load import ImportResult, import_account

__all__ = ["FORMAT_VERSION", "MAX_ENTRY_BYTES", "MAX_TOTAL_BYTES", "ExportResult", "ImportResult",
           "export_account", "import_account"]
