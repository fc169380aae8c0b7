"""`TemplatePolicy`: a `Model` that needs no API key. It answers the loop with tool calls in the
loop's own vocabulary: write_file for every file of an instantiated template and compile, then
profile (which verifies before it times: a separate verify would judge the first candidate's
correctness twice); then, candidate after candidate, the files that the slot agents' next proposal
changes with compile and profile in one turn; finally the best candidate's files back and submit. It
reads only the tool results the loop hands it, so every candidate is judged by the referee
like any model's, and it costs no tokens.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
)
from agent.models.registry import TEMPLATES_MODEL
from agent.tasks import Task
from agent.templates.instantiate import instantiate
from agent.templates.plan import NotCovered, Plan
from agent.templates.search import Outcome, Proposal, Search
from agent.templates.slots import Observation, SlotSpace, default_makers
from agent.tune.space import DeviceLimits
from agent.workspace import content_hash

_TIME = re.compile(r"time: yours ([0-9.eE+-]+) ms \(IQR ([0-9.eE+-]+)")
_TURNS = re.compile(r"turns (\d+)/\d+")
DRY_RUN_MARK = "compile-only dry run"
LOOP_TOOLS = frozenset({"write_file", "compile", "verify", "profile", "submit", "tune"})
RESERVED_TURNS = 3  # the restore-and-submit turn, and room for a refused submission


@dataclass
class _Turn:
    """What the policy's last turn asked for."""

    kind: str  # build (writes + compile [+ verify/profile]), verify, profile, submit, tune
    proposal: Proposal | None
    calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name


class TemplatePolicy:
    name = TEMPLATES_MODEL

    def __init__(
        self,
        plan: Plan | NotCovered,
        *,
        gpu: DeviceLimits | None = None,
        allow_tf32: bool = False,
        max_candidates: int = 12,
        use_tune: bool = False,
        tune_budget_s: float = 60.0,
    ) -> None:
        self.plan = plan
        self.gpu = gpu or DeviceLimits()
        self.allow_tf32 = allow_tf32
        self.use_tune = use_tune
        self.tune_budget_s = tune_budget_s
        self.search: Search | None = None
        self.tunable: dict[str, list[int]] = {}
        if isinstance(plan, Plan):
            space = SlotSpace(plan, self.gpu, allow_tf32=allow_tf32)
            self.tunable = space.tunable()
            obs = Observation(plan=plan, gpu=self.gpu)
            self.search = Search(space, default_makers(), obs, max_candidates=max_candidates)
        self.written: dict[str, str] = {}
        self.by_hash: dict[str, Outcome] = {}
        self.files: dict[int, dict[str, str]] = {}
        self.last: _Turn | None = None
        self.dry_run = False
        self.submissions = 0
        self.tuned = False
        self._ids = itertools.count(1)

    @classmethod
    def for_task(cls, task: Task | Path | str, plan: Plan | NotCovered, **options: Any) -> TemplatePolicy:
        """The policy for one task; `plan` is `recognize`'s answer for it (a NotCovered plan makes
        a policy that explains why and calls no tool)."""
        return cls(plan, **options)

    # -- the Model protocol -----------------------------------------------------------------
    def query(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], *, max_output_tokens: int | None = None
    ) -> ModelResponse:
        offered = {t.name for t in tools} or LOOP_TOOLS
        message = self._step(self._results(messages), offered, _turns_left(messages))
        return ModelResponse(
            message=message,
            usage=Usage(),
            cost_usd=0.0,
            stop_reason="tool_use" if message.tool_calls else "end_turn",
            model=self.name,
        )

    # -- one candidate at a time (agent/rl/slot_env.py drives the policy this way) --------------
    def candidate_turn(self, proposal: Proposal, *, judge: bool) -> AssistantMessage:
        """The turn that builds `proposal`: write_file for each of its files the workspace does not
        hold yet, compile, and with `judge` profile (which verifies, then times)."""
        files = self._files(proposal)
        calls = [
            self._call("write_file", {"path": p, "content": t})
            for p, t in files.items()
            if self.written.get(p) != t
        ]
        self.written.update(files)
        calls.append(self._call("compile", {}))
        if judge:
            calls.append(self._call("profile", {}))
        what = f"{proposal.maker} agent: {dict(proposal.changes)}" if proposal.changes else proposal.maker
        text = f"Candidate {len(self.search.judged) + 1 if self.search else 1} ({what}): {len(calls) - 1 - judge} file(s)."
        return self._send("build", proposal, calls, text)

    def read_verdict(
        self, messages: Sequence[Message], offered: set[str] | frozenset[str] = LOOP_TOOLS
    ) -> Outcome | None:
        """The verdict of the candidate the last turn asked for, read from its tool results in
        `messages`; None while it awaits one (it compiled, and the profile is still to come)."""
        return self._outcome(self._results(messages), offered)

    def candidate_hash(self, proposal: Proposal) -> str:
        """The content hash of `proposal`'s files: identical sources are judged once (`by_hash`)."""
        return content_hash(self._files(proposal))

    def forget_files(self) -> None:
        """The workspace was replaced by a fresh one: the next turn writes every file again."""
        self.written.clear()

    # -- reading what came back ---------------------------------------------------------------
    def _results(self, messages: Sequence[Message]) -> dict[str, ToolResultMessage]:
        if self.last is None:
            return {}
        return {
            m.tool_call_id: m
            for m in messages
            if isinstance(m, ToolResultMessage) and m.tool_call_id in self.last.calls
        }

    def _outcome(
        self, results: dict[str, ToolResultMessage], offered: set[str] | frozenset[str]
    ) -> Outcome | None:
        """The verdict of the candidate the last turn judged; None while it still awaits one (it
        compiled, or it verified and the profile is still to come)."""
        assert self.last is not None
        by_tool = {name: results.get(cid) for cid, name in self.last.calls.items()}
        compiled = by_tool.get("compile")
        if compiled is not None and compiled.is_error:
            return Outcome(False, reason="compile error: " + _first_line(compiled.content, 1))
        for tool in ("profile", "verify"):
            result = by_tool.get(tool)
            if result is None:
                continue
            if DRY_RUN_MARK in result.content:
                self.dry_run = True
                return Outcome(True, reason="compiled (no GPU to judge it)")
            if result.is_error or not result.content.startswith("VERDICT: correct"):
                return Outcome(False, reason=_first_line(result.content))
            match = _TIME.search(result.content)
            if match:
                return Outcome(True, ms=float(match[1]), iqr_ms=float(match[2]), reason="correct")
            if tool == "profile" or "profile" not in offered:
                return Outcome(True, reason="correct")
        return None

    # -- deciding the next turn ---------------------------------------------------------------
    def _step(
        self,
        results: dict[str, ToolResultMessage],
        offered: set[str] | frozenset[str],
        turns_left: int | None,
    ) -> AssistantMessage:
        if isinstance(self.plan, NotCovered) or self.search is None:
            reason = self.plan.reason if isinstance(self.plan, NotCovered) else "no plan"
            return AssistantMessage(
                text=f"The template library does not cover this task ({reason}), so this policy has no kernel "
                "to write. Use a model (--model PROVIDER:NAME) for it."
            )
        last = self.last
        if last is not None and last.kind == "text":
            return self._say(self._report())
        if last is not None and last.kind == "submit":
            self.submissions += 1
            return self._finish(offered, refused=True)
        if last is not None and last.kind == "tune":
            return self._submit(offered, note="tuned with the tune tool")
        if last is not None and last.proposal is not None:
            outcome = self._outcome(results, offered)
            if outcome is None:  # it compiled: judge it (profile verifies, then times)
                return self._turn("profile" if "profile" in offered else "verify", last.proposal)
            self.search.record(last.proposal, outcome)
            self.by_hash[self.candidate_hash(last.proposal)] = outcome
            if self.dry_run:
                return self._submit(offered, note="compile-only dry run: the first candidate compiled")
        if turns_left is not None and turns_left <= RESERVED_TURNS:
            return self._finish(offered)
        while (proposal := self.search.next()) is not None:
            known = self.by_hash.get(self.candidate_hash(proposal))
            if known is None:
                # The first candidate is compiled in a turn of its own, so a template that does
                # not build is seen before anything is judged; later ones are written, compiled
                # and profiled in one turn.
                judge = proposal.maker not in ("initial", "fallback") and "profile" in offered
                return self.candidate_turn(proposal, judge=judge)
            self.search.record(proposal, known)  # identical sources: judged once
        return self._finish(offered)

    def _turn(self, tool: str, proposal: Proposal) -> AssistantMessage:
        return self._send(tool, proposal, [self._call(tool, {})], f"{tool} the {proposal.maker} candidate.")

    def _finish(self, offered: set[str] | frozenset[str], refused: bool = False) -> AssistantMessage:
        assert self.search is not None
        if refused and self.submissions >= 2:
            return self._say("The submission was refused twice; stopping. " + self._report())
        if self.search.incumbent is None:
            return self._say("No candidate of the template library passed the referee. " + self._report())
        if self.use_tune and not self.tuned and not self.dry_run and "tune" in offered:
            self.tuned = True
            restore = self._restore()
            call = self._call("tune", {"budget_s": self.tune_budget_s})
            return self._send("tune", None, [*restore, call], "Tuning the best candidate's declared slots.")
        return self._submit(offered, note="")

    def _submit(self, offered: set[str] | frozenset[str], note: str) -> AssistantMessage:
        restore = [] if self.tuned else self._restore()
        summary = self._report() + (f" ({note})" if note else "")
        call = self._call("submit", {"summary": summary[:1000]})
        return self._send("submit", None, [*restore, call], "Submitting the best candidate.")

    def _restore(self) -> list[ToolCall]:
        """write_file calls that put the incumbent's files back."""
        assert self.search is not None and self.search.incumbent is not None
        best = self._files(Proposal(self.search.incumbent, "best"))
        calls = [
            self._call("write_file", {"path": p, "content": t})
            for p, t in best.items()
            if self.written.get(p) != t
        ]
        self.written.update(best)
        return calls

    # -- helpers ------------------------------------------------------------------------------
    def _files(self, proposal: Proposal) -> dict[str, str]:
        assert isinstance(self.plan, Plan)
        key = hash(tuple(sorted(proposal.config.items())))
        if key not in self.files:
            self.files[key] = instantiate(
                self.plan,
                proposal.config,
                sm_count=self.gpu.sm_count,
                allow_tf32=self.allow_tf32,
                tunable=self.tunable,
            )
        return self.files[key]

    def _call(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        import json

        return ToolCall.from_raw(id=f"tp_{next(self._ids)}", name=name, raw_arguments=json.dumps(arguments))

    def _say(self, text: str) -> AssistantMessage:
        """A turn without tool calls (the loop nudges, then stops the run as model_stopped)."""
        self.last = _Turn("text", None)
        return AssistantMessage(text=text)

    def _send(
        self, kind: str, proposal: Proposal | None, calls: list[ToolCall], text: str
    ) -> AssistantMessage:
        self.last = _Turn(kind, proposal, {c.id: c.name for c in calls})
        return AssistantMessage(text=text, tool_calls=calls)

    def _report(self) -> str:
        assert isinstance(self.plan, Plan) and self.search is not None
        best = self.search.best
        time = f", {best.ms:.4g} ms" if best is not None and best.ms is not None else ""
        return f"{self.plan.describe()}; {len(self.search.judged)} candidate(s) judged{time}."


def _turns_left(messages: Sequence[Message]) -> int | None:
    for message in reversed(messages):
        text = message.content if isinstance(message, ToolResultMessage) else getattr(message, "text", "")
        match = _TURNS.search(text or "")
        if match and "budget left" in (text or ""):
            return int(match[1])
    return None


def _first_line(text: str, index: int = 0) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[min(index, len(lines) - 1)][:300] if lines else ""
