"""A model-checked engine (issue 18, item 4): a Hypothesis state machine drives one account through
random sandboxes, writes, archives, discards, rollbacks, two sandboxes open at once, injected disk
faults and restarts, and compares every read (the content at each version, the log, a diff, each
record by id) with a plain in-memory model; each archive commits what its preview listed (issue 41).

The model: a list of versions, each the set of turn texts it holds; and the open sandboxes, each
the texts written to it. A fault during an archive leaves the account at N or N+1 (whichever the
store says, checked whole against the model), never in between.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, precondition, rule

import soulpass
from fault_helpers import MODES, Faults
from soulpass.consolidation.preview import ArchivePreview
from soulpass.errors import SoulpassError


class EngineModel(RuleBasedStateMachine):
    sandboxes = Bundle("sandboxes")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="soulpass-model-"))
        self.sp = soulpass.open(self.tmp / "home", embedder="none")
        self.acct = self.sp.create_account("ann")
        self.versions: list[frozenset[str]] = [frozenset()]
        self.open: dict[str, list[str]] = {}
        self.counter = 0
        self.last_added: set[str] | None = None

    def teardown(self) -> None:
        self.acct.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- actions --------------------------------------------------------------------------------

    @rule(target=sandboxes)
    def open_sandbox(self) -> str:
        sb = self.acct.create_sandbox("s")
        self.open[sb.id] = []
        return sb.id

    @rule(sid=sandboxes, n=st.integers(1, 3))
    def write(self, sid: str, n: int) -> None:
        if sid not in self.open:
            return
        for _ in range(n):
            self.counter += 1
            text = f"turn {self.counter}"
            self.acct.sandbox(sid).add_turn("user", text)
            self.open[sid].append(text)

    @rule(sid=consumes(sandboxes))
    def archive(self, sid: str) -> None:
        if sid not in self.open:
            return
        preview = self.acct.preview(sid)
        result = self.acct.archive(sid)
        self._archived(sid, result)
        self._as_previewed(preview, result)

    @rule(sid=consumes(sandboxes), k=st.integers(1, 60), mode=st.sampled_from(MODES))
    def archive_with_a_disk_fault(self, sid: str, k: int, mode: str) -> None:
        if sid not in self.open:
            return
        with Faults(fail_at=k, mode=mode).installed(), contextlib.suppress(OSError, SoulpassError):
            self.acct.archive(sid)
        self.restart()  # a fault is followed by a fresh process, as an operator would do
        head = self.acct.head()
        assert head in (len(self.versions) - 1, len(self.versions)), head
        if head == len(self.versions):  # it committed
            self._archived(sid, None, committed=True)
        else:
            self.sandboxes_still_open(sid)

    @rule(sid=consumes(sandboxes))
    def discard(self, sid: str) -> None:
        if sid not in self.open:
            return
        self.acct.discard(sid)
        del self.open[sid]

    @precondition(lambda self: len(self.versions) > 1)
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, len(self.versions) - 1))
        version = self.acct.rollback(target)
        self.versions.append(self.versions[target])
        assert version == len(self.versions) - 1
        self.last_added = None

    @rule()
    def restart(self) -> None:
        self.acct.close()
        self.sp = soulpass.open(self.tmp / "home", embedder="none")
        self.acct = self.sp.account("ann")

    # --- the model's bookkeeping ------------------------------------------------------------------

    def _archived(self, sid: str, result: object, committed: bool | None = None) -> None:
        texts = self.open.pop(sid)
        if committed is None:
            committed = isinstance(result, soulpass.Committed)
            assert committed == bool(texts), (result, texts)  # an empty sandbox commits nothing
        if committed:
            self.versions.append(self.versions[-1] | frozenset(texts))
            self.last_added = set(texts)

    def _as_previewed(self, preview: ArchivePreview, result: object) -> None:
        """The archive committed what its preview listed: each turn under the id it named."""
        if preview.empty:
            assert not isinstance(result, soulpass.Committed)
            return
        assert isinstance(result, soulpass.Committed) and result.version == preview.version
        named = {i.record_id: i.text for i in preview.items if i.action == "add"}
        assert {i for ids in self.acct.log()[-1].added.values() for i in ids} == set(named)
        assert {rid: self.acct.record(str(rid)).text for rid in named} == named

    def sandboxes_still_open(self, sid: str) -> None:
        if not self.open[sid] and sid not in {i.sandbox_id for i in self.acct.sandboxes()}:
            del self.open[sid]  # an empty sandbox's archive removes it without a version: nothing was lost
            return
        buffered = [str(t["text_excerpt"]) for t in self.acct.sandbox(sid).buffer().new_turns]
        assert buffered == self.open[sid]  # nothing acknowledged was lost
        result = self.acct.archive(sid)  # and the archive can be retried
        self._archived(sid, result)

    # --- what every read must say ------------------------------------------------------------------

    def _content(self, at: int | None = None) -> frozenset[str]:
        return frozenset(t.text_excerpt for t in self.acct.records("turn_user", at=at))

    @invariant()
    def head_and_log_match(self) -> None:
        assert self.acct.head() == len(self.versions) - 1
        assert [e.version for e in self.acct.log()] == list(range(1, len(self.versions)))

    @invariant()
    def every_version_reads_as_the_model(self) -> None:
        for v in range(max(0, len(self.versions) - 4), len(self.versions)):  # show --at, the newest four
            assert self._content(v) == self.versions[v], v

    @invariant()
    def the_last_diff_and_records_by_id(self) -> None:
        head = len(self.versions) - 1
        if head == 0:
            return
        diff = self.acct.diff(head - 1, head)
        added = set(diff.added.get("turn_user", []))
        if self.last_added is not None:
            assert {self.acct.record(i).text_excerpt for i in added} == self.last_added
        for rec in self.acct.records("turn_user"):
            assert self.acct.record(rec.id).text_excerpt == rec.text_excerpt


TestEngineModel = EngineModel.TestCase
TestEngineModel.settings = settings(max_examples=60, stateful_step_count=60, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
