"""What every command shares: the home folder and rules from the root options, and ``--account``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from soulpass.store.location import locate

if TYPE_CHECKING:  # the engine is imported when a command runs, not for `--help`
    from soulpass.engine import Account, Soulpass
    from soulpass.index.catalog import FullText

__all__ = ["State", "account_option"]


@dataclass
class State:
    home: Path  # the home folder; with a postgresql:// store, the local folder beside the database
    rules_file: Path | None
    fulltext: FullText | None = None  # None: what each account's index records, else FTS5
    store: str | None = None  # a postgresql:// URL: the accounts are there, not under ``home``

    @property
    def location(self) -> str:
        """Where the accounts are, for messages: the home folder, or the database (password hidden)."""
        return locate(self.store).name if self.store else str(self.home)

    def engine(self, *, rerank: bool = False, **options: Any) -> Soulpass:
        """``options``: more keyword arguments of :class:`Soulpass` (``indexing``, ``embedder``)."""
        from soulpass.consolidation.rules import Rules
        from soulpass.engine import Soulpass

        rules = None
        path = self.rules_file or (self.home / "rules.yaml")
        if path.exists():
            rules = Rules.from_yaml(path.read_text(encoding="utf-8"), source=str(path))
        elif self.rules_file is not None:
            raise click.BadParameter(f"{path} does not exist", param_hint="--rules")
        return Soulpass(self.store or self.home, rules=rules, reranker="auto" if rerank else "none",
                        fulltext=self.fulltext, **options)

    def check_home(self) -> None:
        """``NotFound`` ("no such home") when ``--home`` names a folder that does not exist: a
        mistyped home is said, not read as a home without accounts."""
        if self.store is None and not self.home.exists():
            from soulpass.errors import NotFound

            raise NotFound(f"no such home: {self.home} does not exist (check --home or SOULPASS_HOME; "
                           "`soulpass account create` makes one)", home=str(self.home))

    def account(self, name: str, create: bool = False, *, rerank: bool = False, **options: Any) -> Account:
        if not create:
            self.check_home()
        acct = self.engine(rerank=rerank, **options).account(name, create=create)
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            ctx.call_on_close(acct.close)  # release the index (its vector files are locked while open)
        return acct


account_option = click.option(
    "--account", "-a", "account", envvar="SOULPASS_ACCOUNT", required=True,
    help="Account name (env SOULPASS_ACCOUNT).",
)
