"""The names of an account's records and documents (DESIGN §2). Pure arithmetic, no I/O.

Every backend names documents by these keys; they are the account-relative paths of the
plain-file layout, so exporting an account to files is the identity on names (ADR 0004). What
only the files backend has (history copies, the txn packs, the log) is in ``store.files.layout``.
"""

from __future__ import annotations

from soulpass.errors import InvalidInput
from soulpass.ids import check_name, check_record_id, record_date

__all__ = [
    "BUFFER_FILE",
    "CLIPBOARD_DIR",
    "CORE",
    "CORE_MEMORY",
    "GKS_DATA",
    "GKS_FUNCTIONAL",
    "GKS_SHARDS",
    "HISTORY_FOLDER",
    "JOURNAL_DIR",
    "KIND_BY_PREFIX",
    "RECORD_DIRS",
    "SOURCE_FOLDERS",
    "STATE_DIR",
    "USER_PROFILE",
    "VERSION_FILE",
    "buffer_key",
    "clipboard_key",
    "gks_shard_path",
    "id_counter_key",
    "is_journal_path",
    "journal_path",
    "kind_of_id",
    "record_path",
    "sandbox_dir",
    "state_path",
]

CORE = "core"
BUFFER_FILE = "session_buffer.jsonl"  # a sandbox's buffer, in its folder
VERSION_FILE = "core/VERSION.json"
CORE_MEMORY = "core/05_Core_Memory/Core_memory.json"
USER_PROFILE = "core/07_User_block/User_profile.json"
GKS_DATA = "core/09_Genesis_Knowledge_System/GKS_data.json"
GKS_SHARDS = "core/09_Genesis_Knowledge_System/shards"
GKS_FUNCTIONAL = "core/09_Genesis_Knowledge_System/functional"
STATE_DIR = "core/10_state"
CLIPBOARD_DIR = "core/06_Clipboard"  # one Markdown clipboard per agent
# Prose records: ``core/04_Journal/<folder>/YYYY-MM-DD_Title.md`` (folders: journal, experiments,
# reflections, conversations). Their path holds a title, not the id: the log names the paths.
JOURNAL_DIR = "core/04_Journal"

# The top-level folders of an account's plain-file form, what an export or a backup holds: the
# master state, the copies later versions replaced, the version log (with id counters). Whatever
# a backend keeps, its export has these and nothing else (no index, no commit in flight, no sandbox).
HISTORY_FOLDER = "history"  # superseded copies: a passport leaves them out unless asked
SOURCE_FOLDERS = (CORE, HISTORY_FOLDER, "log")

RECORD_DIRS: dict[str, str] = {
    "episode": "core/01_Episodic_memory/episodes",
    "turn_user": "core/01_Episodic_memory/turns/user",
    "turn_llm": "core/01_Episodic_memory/turns/llm",
    "fact": "core/02_Semantic_memory/facts",
    "sensory": "core/03_Sensory_memory",
}
KIND_BY_PREFIX = {"EP": "episode", "TU": "turn_user", "TL": "turn_llm", "SF": "fact", "SR": "sensory"}


def kind_of_id(record_id: str) -> str:
    check_record_id(record_id)
    kind = KIND_BY_PREFIX.get(record_id[:2])
    if kind is None:
        raise InvalidInput(f"{record_id!r} is not a permanent record id", field="record id")
    return kind


def record_path(record_id: str) -> str:
    """Account-relative path of a committed record: sharded by year and month."""
    kind = kind_of_id(record_id)
    year, month, _ = record_date(record_id)
    return f"{RECORD_DIRS[kind]}/{year}/{month}/{record_id}.json"


def state_path(name: str) -> str:
    return f"{STATE_DIR}/{check_name(name, 'state name')}_state.json"


def gks_shard_path(shard: str) -> str:
    return f"{GKS_SHARDS}/{shard}.json"


def is_journal_path(relpath: str) -> bool:
    """A prose record's file: ``core/04_Journal/<folder>/<name>.md``."""
    parts = relpath.split("/")
    return len(parts) == 4 and relpath.startswith(JOURNAL_DIR + "/") and relpath.endswith(".md")


def journal_path(folder: str, day: str, title_slug: str, n: int = 1) -> str:
    """``journal_path("reflections", "2025-12-04", "Refraction")`` ->
    ``core/04_Journal/reflections/2025-12-04_Refraction.md``; ``n`` > 1 adds ``_n`` (same day and title)."""
    check_name(folder, "journal folder")
    name = check_name(f"{day}_{title_slug}" + (f"_{n}" if n > 1 else "") + ".md", "journal file name")
    return f"{JOURNAL_DIR}/{folder}/{name}"


def clipboard_key(agent: str) -> str:
    """``core/06_Clipboard/<agent>.md``: the clipboard of one agent."""
    return f"{CLIPBOARD_DIR}/{check_name(agent, 'agent')}.md"


def sandbox_dir(sandbox_id: str) -> str:
    return f"sandboxes/{check_name(sandbox_id, 'sandbox id')}"


def buffer_key(sandbox_id: str) -> str:
    """The name a sandbox's session buffer goes by (the path of hits on buffered records)."""
    return f"{sandbox_dir(sandbox_id)}/{BUFFER_FILE}"


def id_counter_key(month: str) -> str:
    """The document holding a month's permanent-id counters (``month``: ``YYYYMM``)."""
    if len(month) != 6 or not month.isdigit():
        raise InvalidInput(f"an id counter month is YYYYMM, not {month!r}", field="month")
    return f"log/ids/{month}.json"
