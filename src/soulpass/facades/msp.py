"""``MSP``: the seed's API (MSP memory versioning), with its names, as a thin view over the engine.

``user_id`` is the account name; sandbox ids are unique within the home folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soulpass.consolidation.plan import ConsolidationPlan, plan_consolidation
from soulpass.consolidation.rules import Rules
from soulpass.engine import AlreadyArchived, AwaitingReview, Committed, Planned, Sandbox, Soulpass, Unchanged
from soulpass.errors import Conflict, InvalidInput, NotFound
from soulpass.ids import check_name, utc_now
from soulpass.records import Episode, MasterState, SessionBuffer
from soulpass.sessions.buffer import Limits

__all__ = ["MSP", "ConsolidatedData"]


@dataclass(frozen=True)
class ConsolidatedData:
    """What the rules decided for one session buffer (the seed's ``ConsolidatedData``)."""

    account: str
    plan: ConsolidationPlan

    @property
    def episodes(self) -> list[str]:
        return self.plan.added.get("episode", [])

    @property
    def knowledge(self) -> list[str]:
        return self.plan.added.get("fact", [])

    @property
    def sensory(self) -> list[str]:
        return self.plan.added.get("sensory", [])

    @property
    def core_updates(self) -> list[dict[str, Any]]:
        return self.plan.core_changes

    @property
    def state_changes(self) -> list[dict[str, Any]]:
        return self.plan.state_changes


class MSP:
    """Memory & Soul Passport, seed API. ``home`` is the Soulpass home folder."""

    def __init__(self, home: str | Path, *, rules: Rules | None = None, limits: Limits | None = None) -> None:
        self.engine = Soulpass(home, rules=rules, limits=limits)

    # --- master state ------------------------------------------------------------------

    def load_master_state(self, user_id: str, at: int | None = None) -> MasterState:
        """The whole master state of ``user_id`` at HEAD (or at version ``at``)."""
        if user_id not in self.engine.accounts():  # reading never creates an account
            check_name(user_id, "account name")
            if at not in (None, 0):
                raise NotFound(f"account {user_id!r} has no version {at}", account=user_id)
            return MasterState(version=0, user_id=user_id, metadata={"total_episodes": 0, "total_facts": 0,
                                                                     "total_sessions": 0, "last_consolidation": None})
        acct = self.engine.account(user_id)
        version = acct.check_version(at)
        episodes = [e.model_dump(mode="json") for e in acct.records("episode", version)]
        facts = [f.model_dump(mode="json") for f in acct.records("fact", version)]
        graph = acct.gks(version)
        log = acct.log()
        archives = [e for e in log if e.kind == "archive" and e.version <= version]
        vdoc = next((e for e in log if e.version == version), None)
        return MasterState(
            version=version,
            timestamp=vdoc.timestamp if vdoc is not None else None,
            user_id=acct.name,
            episodic_memory=tuple(episodes),
            semantic_memory={
                "facts": facts,
                "concepts": [n.model_dump(mode="json") for n in graph.nodes],
                "relationships": [e.model_dump(mode="json") for e in graph.edges],
            },
            sensory_memory=tuple(s.model_dump(mode="json") for s in acct.records("sensory", version)),
            core_memory=acct.core_memory(version).model_dump(mode="json", include={"identity", "values", "worldview"}),
            user_profile=acct.user_profile(version).fields,
            states={f"{n}_state": b.data for n, b in acct.states(version).items()},
            metadata={
                "total_episodes": len(episodes),
                "total_facts": len(facts),
                "total_sessions": len(archives),
                "last_consolidation": archives[-1].timestamp if archives else None,
            },
        )

    def save_master_state(self, user_id: str, state: MasterState) -> MasterState:
        """Save ``state`` atomically as the next version; it must be based on HEAD.

        Episodes not yet in the master are appended, states overwritten (latest wins), core
        memory merged carefully (new keys added, existing values kept and the refusal logged).
        """
        acct = self.engine.account(user_id, create=True)
        if state.version != acct.head():
            raise Conflict(f"state is version {state.version} but HEAD is {acct.head()}; reload first",
                           account=user_id)
        sb = acct.create_sandbox("save_master_state")
        try:
            for ep in state.episodic_memory:
                if not str(ep.get("episode_id", ep.get("id", ""))).startswith("EP_"):
                    sb.write_episode(dict(ep))
            for name, data in state.states.items():
                sb.update_state(name, data)
            if state.user_profile:
                sb.update_profile(state.user_profile)
            core = state.core_memory
            for section in ("identity", "worldview"):
                for key, value in (core.get(section) or {}).items():
                    sb.propose_core(section, value, key=key, confidence=1.0, reason="save_master_state")
            for value in core.get("values") or []:
                sb.propose_core("values", value, confidence=1.0, reason="save_master_state")
        except Exception:
            sb.discard()
            raise
        sb.archive()
        return self.load_master_state(user_id)

    def get_master_version(self, user_id: str) -> int:
        """HEAD of ``user_id``; 0 for an account that has no version yet (nothing is created)."""
        if user_id not in self.engine.accounts():
            check_name(user_id, "account name")
            return 0
        return self.engine.account(user_id).head()

    # --- sandboxes ---------------------------------------------------------------------

    def create_sandbox(self, user_id: str, name: str) -> str:
        return self.engine.account(user_id, create=True).create_sandbox(name).id

    def load_sandbox(self, sandbox_id: str) -> Sandbox:
        return self.engine.find_sandbox(sandbox_id)

    def delete_sandbox(self, sandbox_id: str) -> None:
        """Discard the sandbox and its buffer; the master is untouched."""
        self.engine.find_sandbox(sandbox_id).discard()

    # --- session buffer ------------------------------------------------------------------

    def write_episode(self, sandbox_id: str, episode: Episode | dict[str, Any]) -> str:
        return self.engine.find_sandbox(sandbox_id).write_episode(episode)

    def update_state(self, sandbox_id: str, state_name: str, state_data: dict[str, Any]) -> None:
        self.engine.find_sandbox(sandbox_id).update_state(state_name, state_data)

    def write_to_session_buffer(self, sandbox_id: str, entry: dict[str, Any]) -> None:
        """The seed's combined write: ``{"episode": {...}, "state_updates": {name: data}}``."""
        unknown = set(entry) - {"episode", "state_updates"}
        if unknown:
            raise InvalidInput(f"unknown session-buffer keys: {', '.join(sorted(unknown))}", field="entry")
        states = entry.get("state_updates") or {}
        if not isinstance(states, dict):
            raise InvalidInput("state_updates must be an object of state name -> data", field="state_updates")
        sb = self.engine.find_sandbox(sandbox_id)
        sb.write_many([entry["episode"]] if "episode" in entry else [], states)

    def get_session_buffer(self, sandbox_id: str) -> SessionBuffer:
        return self.engine.find_sandbox(sandbox_id).buffer()

    load_session_buffer = get_session_buffer

    # --- consolidation -------------------------------------------------------------------

    def consolidate_session(self, sandbox_id: str) -> MasterState:
        """Archive the sandbox into the next master version and return that master state."""
        sb = self.engine.find_sandbox(sandbox_id)
        if isinstance(result := sb.archive(), AwaitingReview):
            raise _awaiting(result)
        return self.load_master_state(sb.account.name)

    def apply_consolidation_rules(self, buffer: SessionBuffer, master: MasterState) -> ConsolidatedData:
        """Decide what the buffer adds to ``master`` (a pure plan; nothing is written)."""
        sb = self.engine.find_sandbox(buffer.sandbox_id)
        acct = sb.account
        if master.user_id != acct.name:
            raise InvalidInput(f"buffer belongs to {acct.name!r}, master to {master.user_id!r}", field="master")
        if master.version != acct.head():
            raise Conflict(f"master is version {master.version} but HEAD is {acct.head()}")
        plan = plan_consolidation(acct.store.snapshot(), sb.info, sb._buffer.events(), self.engine.rules, utc_now(),
                                  parent=acct.store.snapshot(sb.info.parent_version))
        return ConsolidatedData(account=acct.name, plan=plan)

    def merge_into_master(self, master: MasterState, consolidated: ConsolidatedData) -> MasterState:
        """Commit a consolidation; if HEAD moved since the plan, it is re-planned (rebased)."""
        acct = self.engine.account(master.user_id)
        result = acct.archive(consolidated.plan.sandbox_id)
        match result:
            case Committed() | AlreadyArchived() | Unchanged():
                return self.load_master_state(master.user_id)
            case Planned():
                raise AssertionError("archive without dry_run never returns Planned")
            case AwaitingReview():
                raise _awaiting(result)


def _awaiting(result: AwaitingReview) -> Conflict:
    """The seed's calls commit or fail: a sandbox the review policy holds is a conflict to settle
    with ``Account.approve`` (or ``soulpass archive --approve``)."""
    items = ", ".join(f"{i.id} ({i.review})" for i in result.items)
    return Conflict(f"sandbox {result.sandbox_id} awaits review, nothing committed: {items}; "
                    "approve it with Account.approve", sandbox_id=result.sandbox_id)
