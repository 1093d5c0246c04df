"""Agent tiers on the command line: ``clipboard add|remove|clear|show``, ``context``, ``ingest``, ``chat``.

Without ``--sandbox`` a write runs in a sandbox of its own that is archived at once (one version),
and ``context`` looks through a throw-away sandbox; with ``--sandbox ID`` everything stays in that
sandbox's buffer until it is archived.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

import click

from soulpass.agent import AgentConfig, AgentMemory, ChatEndpoint, ChatSummariser, IngestResult, RedisInbox
from soulpass.agent.scribe import Summariser
from soulpass.cli.output import console, emit_json, err_console
from soulpass.cli.state import State, account_option
from soulpass.consolidation.clipboard import read_clipboard_items
from soulpass.engine import Account, AwaitingReview, Committed

__all__ = ["COMMANDS"]

T = TypeVar("T")

agent_option = click.option("--agent", "agent", envvar="SOULPASS_AGENT", required=True,
                            help="The agent acting (env SOULPASS_AGENT).")
sandbox_option = click.option("--sandbox", "sandbox_id", default=None,
                              help="Work in this sandbox (default: a sandbox of its own, archived at once).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--account``, ``--agent`` and ``--sandbox``: whom and where every agent command acts for."""
    return account_option(agent_option(sandbox_option(f)))


def _chat_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--api-key", envvar="SOULPASS_CHAT_API_KEY", default=None,
                     help="API key of the chat endpoint (env SOULPASS_CHAT_API_KEY).")(f)
    f = click.option("--model", "model", envvar="SOULPASS_CHAT_MODEL", default=None,
                     help="Model name at the chat endpoint (env SOULPASS_CHAT_MODEL).")(f)
    return click.option("--base-url", envvar="SOULPASS_CHAT_BASE_URL", default=None,
                        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 "
                             "(env SOULPASS_CHAT_BASE_URL).")(f)


def _endpoint(base_url: str | None, model: str | None, api_key: str | None) -> ChatEndpoint | None:
    if not base_url:
        return None
    if not model:
        raise click.BadParameter("a chat endpoint needs --model (or SOULPASS_CHAT_MODEL)", param_hint="--model")
    return ChatEndpoint(base_url, model, api_key=api_key)


@contextmanager
def _memory(acct: Account, sandbox_id: str | None, label: str, *, keep: bool,
            summariser: Summariser | None = None, quiet: bool = False) -> Iterator[AgentMemory]:
    """The named sandbox, or a new one that is archived (``keep``) or discarded afterwards."""
    if sandbox_id is not None:
        yield AgentMemory(acct.sandbox(sandbox_id), summariser=summariser)
        return
    mem = AgentMemory(acct.create_sandbox(label), summariser=summariser)
    ok = False
    try:
        yield mem
        ok = True
    finally:
        if ok and keep:
            result = mem.sandbox.archive()
            if isinstance(result, Committed) and not quiet:
                err_console.print(f"[dim]archived as version {result.version}[/]")
            elif isinstance(result, AwaitingReview):  # the sandbox stays; its owner approves it
                err_console.print(_awaiting(result))
        elif not mem.sandbox.archived:
            mem.sandbox.discard()


def _show_items(agent: str, items: tuple[str, ...] | list[str], as_json: bool) -> None:
    if as_json:
        emit_json({"agent": agent, "items": list(items)})
        return
    if not items:
        console.print(f"[dim]{agent}'s clipboard is empty[/]")
    for i, item in enumerate(items, 1):
        console.print(f"{i}. {item}", markup=False)


@click.group("clipboard")
def clipboard() -> None:
    """An agent's pinned scratchpad: injected into every context, changed only by these commands."""


@clipboard.command("add")
@click.argument("item")
@_target_options
@json_option
@click.pass_obj
def clipboard_add(state: State, item: str, account: str, agent: str, sandbox_id: str | None, as_json: bool) -> None:
    """Pin ITEM to the agent's clipboard."""
    with _memory(state.account(account), sandbox_id, f"clipboard {agent}", keep=True, quiet=as_json) as mem:
        view = mem.clipboard_add(agent, item)
    _show_items(agent, view.items, as_json)


@clipboard.command("remove")
@click.argument("item")
@_target_options
@json_option
@click.pass_obj
def clipboard_remove(state: State, item: str, account: str, agent: str, sandbox_id: str | None,
                     as_json: bool) -> None:
    """Unpin ITEM, given by its number in `clipboard show` or its exact text."""
    with _memory(state.account(account), sandbox_id, f"clipboard {agent}", keep=True, quiet=as_json) as mem:
        which: str | int = int(item) if item.isdigit() and item not in mem.clipboard_show(agent).items else item
        view = mem.clipboard_remove(agent, which)
    _show_items(agent, view.items, as_json)


@clipboard.command("clear")
@_target_options
@click.pass_obj
def clipboard_clear(state: State, account: str, agent: str, sandbox_id: str | None) -> None:
    """Unpin everything on the agent's clipboard."""
    with _memory(state.account(account), sandbox_id, f"clipboard {agent}", keep=True) as mem:
        mem.clipboard_clear(agent)
    console.print(f"{agent}'s clipboard is empty")


@clipboard.command("show")
@_target_options
@click.option("--at", type=int, default=None, help="The committed clipboard as of this version.")
@json_option
@click.pass_obj
def clipboard_show(state: State, account: str, agent: str, sandbox_id: str | None, at: int | None,
                   as_json: bool) -> None:
    """The agent's clipboard (committed, or as a sandbox sees it with --sandbox)."""
    acct = state.account(account)
    if sandbox_id is not None:
        items: tuple[str, ...] | list[str] = AgentMemory(acct.sandbox(sandbox_id)).clipboard_show(agent).items
    else:
        items = read_clipboard_items(acct.store, agent, acct.check_version(at))
    _show_items(agent, items, as_json)


def _situation(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--situation")
        out[key.strip()] = value.strip()
    return out


situation_option = click.option(
    "--situation", "situation", multiple=True, metavar="KEY=VALUE",
    help="Situation context (interaction_mode, location_context, agent_role, mission_goal); repeatable.")


@click.command("context")
@click.argument("message")
@_target_options
@click.option("--budget", "budget", type=int, default=2000, show_default=True, help="Token budget.")
@situation_option
@json_option
@click.pass_obj
def context(state: State, message: str, account: str, agent: str, sandbox_id: str | None, budget: int,
            situation: tuple[str, ...], as_json: bool) -> None:
    """Print the context block AGENT would get for MESSAGE (orientation, clipboard, guidance, hot log, memories)."""
    with _memory(state.account(account), sandbox_id, f"context {agent}", keep=False) as mem:
        block = mem.context(agent, message, budget, situation=_situation(situation) or None)
    if as_json:
        emit_json(block.to_dict())
        return
    click.echo(block.text)
    err_console.print(f"[dim]{block.tokens} of {budget} tokens"  # stderr: stdout is the prompt itself
                  + "".join(f"; {s.name}: {s.dropped} cut" for s in block.sections if s.dropped) + "[/]")


@click.command("ingest")
@click.argument("source")
@_target_options
@click.option("--kind", type=click.Choice(["auto", "path", "url", "text"]), default="auto", show_default=True,
              help="What SOURCE is (auto: an http(s) URL, an existing file, else text).")
@click.option("--title", default=None, help="Title of the document (default: its own).")
@_chat_options
@json_option
@click.pass_obj
def ingest(state: State, source: str, account: str, agent: str, sandbox_id: str | None, kind: str,
           title: str | None, base_url: str | None, model: str | None, api_key: str | None, as_json: bool) -> None:
    """Keep a document (path, URL or text) in sensory memory, chunked for search, with an episode about it."""
    endpoint = _endpoint(base_url, model, api_key)
    summariser = ChatSummariser(endpoint) if endpoint else None
    acct = state.account(account)
    with _memory(acct, sandbox_id, f"ingest {agent}", keep=True, summariser=summariser, quiet=as_json) as mem:
        result = mem.ingest(source, agent=agent, kind=kind, title=title)  # type: ignore[arg-type]
    if sandbox_id is None:  # archived: name the records by their permanent ids
        result = _permanent_ids(result, _id_map(acct, mem.sandbox.id))
    if as_json:
        emit_json({"raw_id": result.raw_id, "chunk_ids": list(result.chunk_ids), "episode_id": result.episode_id,
                   "source": result.source, "chars": result.chars})
        return
    console.print(f"{result.source}: {result.chars} characters, {max(len(result.chunk_ids), 1)} chunk(s); "
                  f"raw {result.raw_id}, episode {result.episode_id}", markup=False)


def _id_map(acct: Account, sandbox_id: str) -> dict[str, str]:
    """Temporary id -> permanent id, from the log entry of the version ``sandbox_id`` became."""
    entry = next((e for e in reversed(acct.log()) if e.source_sandbox == sandbox_id), None)
    return dict((entry.model_extra or {}).get("id_map", {})) if entry is not None else {}


def _permanent_ids(result: IngestResult, id_map: dict[str, str]) -> IngestResult:
    return replace(result, raw_id=id_map.get(result.raw_id, result.raw_id),
                   chunk_ids=tuple(id_map.get(i, i) for i in result.chunk_ids),
                   episode_id=id_map.get(result.episode_id, result.episode_id))


CHAT_HELP = "/clip add TEXT · /clip rm N · /clip · /rag QUERY · /inbox · /hot · /quit"


@click.command("chat")
@_target_options
@click.option("--budget", "budget", type=int, default=2000, show_default=True, help="Token budget of the context.")
@situation_option
@click.option("--show-context/--hide-context", default=True, show_default=True,
              help="Print the context block before each answer.")
@click.option("--keep-sandbox", is_flag=True, help="Leave the sandbox open at the end instead of archiving it.")
@click.option("--inbox-redis", "redis_url", default=None, envvar="SOULPASS_INBOX_REDIS_URL",
              help="Deliver /rag results through Redis at this URL (env SOULPASS_INBOX_REDIS_URL); "
                   "default: the session buffer.")
@_chat_options
@click.pass_obj
def chat(state: State, account: str, agent: str, sandbox_id: str | None, budget: int, situation: tuple[str, ...],
         show_context: bool, keep_sandbox: bool, redis_url: str | None, base_url: str | None, model: str | None,
         api_key: str | None) -> None:
    """Interactive shell: logs each turn, shows the context block and, with an endpoint, answers with it."""
    endpoint = _endpoint(base_url, model, api_key)
    acct = state.account(account, create=True)
    sb = acct.sandbox(sandbox_id) if sandbox_id else acct.create_sandbox(f"chat {agent}")
    inbox = RedisInbox.from_url(redis_url, acct.name) if redis_url else None
    mem = AgentMemory(sb, config=AgentConfig(), summariser=ChatSummariser(endpoint) if endpoint else None,
                      inbox=inbox)
    sit = _situation(situation) or None
    console.print(f"[dim]sandbox {sb.id} · {CHAT_HELP}[/]")
    while True:
        try:
            line = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except click.Abort:  # end of input (Ctrl-D) ends the chat like /quit
            break
        text = line.strip()
        if text in ("/quit", "/exit"):
            break
        if not text:
            continue
        if text.startswith("/"):
            _chat_command(mem, agent, text)
            continue
        block = mem.context(agent, text, budget, situation=sit)
        if show_context:
            console.print(block.text, markup=False, highlight=False, soft_wrap=True, style="dim")
        asked = mem.log(agent, text, speaker="user")
        if endpoint is None:
            console.print("[dim](logged; no chat endpoint configured)[/]")
            continue
        answer = endpoint.complete([{"role": "system", "content": block.text}, {"role": "user", "content": text}],
                                   temperature=0.7)
        mem.log(agent, answer, reply_to=asked.id)
        mem.inbox(agent, pop=True)  # what the context showed has been read
        console.print(f"{agent}> {answer}", markup=False)
    if keep_sandbox:
        console.print(f"sandbox {mem.sandbox.id} left open")
        return
    result = mem.sandbox.archive()
    if isinstance(result, Committed):
        console.print(f"archived as version {result.version}")
    elif isinstance(result, AwaitingReview):
        console.print(_awaiting(result))


def _awaiting(result: AwaitingReview) -> str:
    return (f"sandbox {result.sandbox_id} awaits review ({len(result.items)} item(s)); nothing committed: "
            f"`soulpass archive {result.sandbox_id} --dry-run`, then `--approve`")


def _chat_command(mem: AgentMemory, agent: str, text: str) -> None:
    cmd, _, arg = text.partition(" ")
    arg = arg.strip()
    if cmd == "/clip":
        sub, _, rest = arg.partition(" ")
        if sub == "add" and rest:
            mem.clipboard_add(agent, rest)
        elif sub in ("rm", "remove") and rest:
            mem.clipboard_remove(agent, int(rest) if rest.isdigit() else rest)
        elif sub == "clear":
            mem.clipboard_clear(agent)
        console.print(mem.clipboard_show(agent).markdown(), markup=False)
    elif cmd == "/rag" and arg:
        result = mem.rag_search(agent, arg)
        console.print(f"{len(result.episode_ids)} episode(s) delivered to {agent}'s inbox", markup=False)
    elif cmd == "/inbox":
        for m in mem.inbox(agent):
            console.print(m.markdown, markup=False)
    elif cmd == "/hot":
        for e in mem.hot():
            console.print(f"{e.at:%H:%M} {e.agent} [{e.kind}] {e.text}", markup=False)
    else:
        console.print(CHAT_HELP)


COMMANDS = [clipboard, context, ingest, chat]
