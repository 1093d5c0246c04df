"""What an index rebuild asks of every backend: every copy the account holds (``copies``), current
ones first, each with the version that replaced it, counted before any is read."""

from __future__ import annotations

from contract_backends import Backend
from contract_changes import JOURNAL
from test_master_store import commit_all, history

from soulpass.store.contract import StoredCopy
from soulpass.store.keys import CORE_MEMORY, VERSION_FILE


def test_every_copy_current_first_with_the_version_that_replaced_it(backend: Backend) -> None:
    commit_all(backend.master("alice"), history())
    store = backend.engine().backend.open("alice")
    walk = store.copies()
    found = list(walk)
    assert len(walk) == len(found)
    current = [c.replaced_at is None for c in found]
    assert current == sorted(current, reverse=True)  # current copies, then the replaced ones
    assert all(isinstance(c.copy, StoredCopy) for c in found)
    # The version header (core/VERSION.json) is no record or document: a backend may list it or not.
    in_force = {c.copy.key for c in found if c.replaced_at is None} - {VERSION_FILE}
    assert in_force == {c.key for c in store.current_copies()} - {VERSION_FILE}
    core = {c.replaced_at: int(c.copy.body["version"]) for c in found if c.copy.key == CORE_MEMORY}
    assert core == {None: 3, 2: 1, 3: 2}  # written by 1, 2, 3; replaced by 2 and 3
    assert [(c.replaced_at, c.copy.body["version"]) for c in found if c.copy.key == JOURNAL] == [(3, 1)]


def test_copies_are_chosen_by_key_before_they_are_read(backend: Backend) -> None:
    commit_all(backend.master("alice"), history())
    store = backend.engine().backend.open("alice")
    asked: list[str] = []

    def wanted(key: str) -> bool:
        asked.append(key)
        return key == CORE_MEMORY

    walk = store.copies(wanted)
    assert len(walk) == 3 and asked  # listed and chosen when made
    assert [c.copy.key for c in walk] == [CORE_MEMORY] * 3
