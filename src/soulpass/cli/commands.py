"""The CLI's commands by name, and where each is defined: ``soulpass --help`` lists them from here
and imports none, and ``soulpass NAME`` imports only the modules NAME needs (the engine, pydantic
and numpy load when a command runs, not for help). ``tests/test_cli.py`` checks this table against
the commands themselves, so it cannot drift.
"""

from __future__ import annotations

__all__ = ["COMMANDS"]

# name -> (modules of soulpass.cli defining it, then those adding subcommands to it; its short help)
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "account": (("sandbox_cmds", "account_cmds"),
        "Create, list and delete accounts."),
    "adopt": (("memory_cmds",),
        "Commit the files edited by hand (see `audit`) as new versions, the originals kept in the history."),
    "archive": (("sandbox_cmds",),
        "Consolidate a sandbox into the next master version (exit 8 while it awaits review)."),
    "audit": (("integrity_cmds",),
        "Reconcile files, index and vectors; exit 1 when anything is found."),
    "backup": (("integrity_cmds",),
        "Snapshot the account's files into a git repository: one commit per run, naming the "
        "version."),
    "bench": (("bench_cmds",),
        "Benchmarks run through the public engine."),
    "chat": (("agent_cmds",),
        "Interactive shell: logs each turn, shows the context block and, with an endpoint, answers "
        "with it."),
    "clipboard": (("agent_cmds",),
        "An agent's pinned scratchpad: injected into every context, changed only by these commands."),
    "context": (("agent_cmds",),
        "Print the context block AGENT would get for MESSAGE (orientation, clipboard, guidance, hot"
        " log, memories)."),
    "demo": (("demo",),
        "Run the seed's example flow on a fresh account and print a timeline and a diff."),
    "diff": (("version_cmds",),
        "What changed from version A to version B: records added, superseded, replaced and retired;"
        " documents created, changed and removed, with the keys that changed inside them."),
    "discard": (("sandbox_cmds",),
        "Throw a sandbox and its buffer away; the master is untouched."),
    "edit": (("memory_cmds",),
        "Commit a version in which RECORD_ID carries the new fields (a fact is superseded by a new "
        "one)."),
    "export": (("exp_cmds",),
        "Write ACCOUNT as one verified passport file."),
    "forget": (("memory_cmds",),
        "Erase RECORD_IDS (or a subject's facts, or a query's hits) from HEAD, history and the "
        "index."),
    "history": (("memory_cmds",),
        "Every version that wrote RECORD_ID, oldest first, with the fields each one changed."),
    "import": (("imp_cmds", "exp_cmds"),
        "Take memories from other formats into an account."),
    "import-from": (("imp_cmds",),
        "Deprecated spelling of `soulpass import SOURCE PATH` (removed in a later release): the same "
        "import, with a note on stderr that gives the new form."),
    "index": (("search_cmds", "backlog_cmds", "journal_cmds"),
        "The derived index: status and rebuild from the files."),
    "ingest": (("agent_cmds",),
        "Keep a document (path, URL or text) in sensory memory, chunked for search, with an episode"
        " about it."),
    "journal": (("journal_cmds",),
        "Verbatim prose records: journal, experiment, reflection and conversation entries."),
    "key": (("server_cmds",),
        "API keys for the REST and MCP servers (only their hashes are stored)."),
    "log": (("version_cmds",),
        "The version log: one row per version, newest last."),
    "mcp": (("server_cmds",),
        "Run the MCP server (extra 'server'): memory tools for an agent, over stdio or HTTP."),
    "migrate": (("migrate_cmds",),
        "Copy accounts from SRC to DST (each a home folder or a postgresql:// URL) with every "
        "version, then read them back and compare digests; their API keys and the admin keys go along."),
    "patterns": (("journal_cmds",),
        "Recurring insights over time: identical semantic hashes and near-duplicates by embedding."),
    "prune": (("integrity_cmds",),
        "Remove index rows whose file is gone."),
    "restore": (("integrity_cmds",),
        "Bring an account back from a backup; every file is checked against the backup's hashes."),
    "retag": (("memory_cmds",),
        "Read again which turns give a standing instruction or preference; commit the tags that "
        "changed."),
    "rollback": (("version_cmds",),
        "Commit a new version whose content equals VERSION (nothing is destroyed)."),
    "sandbox": (("sandbox_cmds",),
        "Open, list, inspect and discard sandboxes."),
    "schema": (("version_cmds",),
        "JSON Schemas of the records and documents."),
    "search": (("search_cmds",),
        "Hybrid search (full text, and vectors with the 'embed' extra) over an account's committed "
        "memory."),
    "serve": (("server_cmds",),
        "Run the REST API (extra 'server'); every request needs an API key (see 'soulpass key')."),
    "show": (("version_cmds",),
        "Show a record (EP_…, TU_…, TL_…, SF_…, SR_…) or a document (core, profile, gks, "
        "state:NAME)."),
    "worker": (("worker_cmds",),
        "Run an embedding worker on the Redis queue until SIGTERM (see also `worker status`)."),
    "write": (("sandbox_cmds",),
        "Write to a sandbox's session buffer (never to the master)."),
}
