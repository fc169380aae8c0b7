"""Many rollouts at once, judged on the batch's executor: the RL environment at scale.

    evaluator = RayEvaluator(evals_per_gpu=4)              # or LocalEvaluator(gpus=[...], ...)
    report = run_rollouts(tasks, make_model, samples=8, concurrency=32, evaluator=evaluator,
                          options=JudgingOptions(policy="kernelbench"), out=Path("runs/rollouts"))

Each rollout is a `KernelSession` (the tools and failure rules the verifiers environment wraps)
driven by a `Model` (a scripted one, the built-in template policy, or an LLM) through the agent loop
`agent solve` runs (agent/run/loop.py), the session as its tool executor. Its verify, profile
and submit calls go to the evaluator through `BatchReferee` (compile slots, then a GPU slot; with
Ray, judges placed on the cluster's GPUs, time rewards taken on GPUs that do not train), behind a
`DedupReferee`: a candidate whose content a rollout of the same task already had judged is not
judged again, and candidates that arrive together wait for the first. Every rollout writes a
transcript in the product's format (`agent show` and `agent export` read it) and its outcome (the
reward and why) beside it, and ends as an attempt in a batch store (`agent report` reads it).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel

from agent.batch.agent_runs import BatchReferee
from agent.batch.config import BatchConfig, JudgingOptions, WorkItem
from agent.batch.executors import Evaluator
from agent.batch.records import AttemptRecord
from agent.batch.stages import StageShare, stage_breakdown
from agent.batch.store import Store
from agent.messages import SystemMessage, ToolCall, UserMessage
from agent.models.base import Model
from agent.referee.results import EvalResult
from agent.rl.session import KernelSession, RolloutConfig, RolloutOutcome
from agent.run.context import ContextLimits, ContextWindow
from agent.run.loop import AgentLoop
from agent.run.setup import run_prompts, transcript_header, versions
from agent.tasks import Task
from agent.tools import ToolOutput
from agent.tools.candidates import Referee, SandboxOpener
from agent.transcripts.format import RunEndEvent, TranscriptWriter
from agent.workspace import Workspace
from sandbox.base import Sandbox

TRANSCRIPT = "transcript.jsonl"
OUTCOME = "outcome.json"


class DedupReferee:
    """A Referee that judges each distinct candidate once: the key is the task's content hash, the
    workspace's (its model-owned files) and whether it is timed. A failure of the machinery (an
    exception) is not kept: the next identical candidate is judged afresh."""

    def __init__(self, inner: Referee) -> None:
        self.inner = inner
        self.judged = 0
        self.reused = 0
        self.results: list[EvalResult] = []
        """The verdicts it judged (not the reused copies), in the order they came."""
        self._lock = threading.Lock()
        self._verdicts: dict[tuple[str, str, bool], concurrent.futures.Future[EvalResult]] = {}

    def device(self) -> str | None:
        return self.inner.device()

    def evaluate(
        self, task: Task, workspace: Workspace, *, sandbox: Sandbox | SandboxOpener, profile: bool
    ) -> EvalResult:
        key = (task.sha256, workspace.content_hash(), profile)
        with self._lock:
            verdict = self._verdicts.get(key)
            first = verdict is None
            if verdict is None:
                verdict = self._verdicts[key] = concurrent.futures.Future()
                self.judged += 1
            else:
                self.reused += 1
        if first:
            try:
                judged = self.inner.evaluate(task, workspace, sandbox=sandbox, profile=profile)
                with self._lock:
                    self.results.append(judged)
                verdict.set_result(judged)
            except BaseException as exc:
                with self._lock:
                    del self._verdicts[key]
                verdict.set_exception(exc)
                raise
        result = verdict.result().model_copy(deep=True)
        result.solution.path = str(workspace.root)
        return result


ModelFactory = Callable[[Task], Model]
"""A fresh policy for one rollout of a task (models keep per-conversation state)."""


class RolloutRecord(BaseModel):
    task: str
    sample: str
    outcome: RolloutOutcome
    wall_s: float
    transcript: str


class RolloutsReport(BaseModel):
    rollouts: list[RolloutRecord]
    skipped: int
    """Already done in the store (a rerun resumes)."""
    judged: int
    reused: int
    gpu_s: float
    """The judged evaluations' candidate and judge processes (agent.tools.candidates.gpu_seconds)."""
    stages: list[StageShare]
    """Where the judged evaluations' time went (agent.batch.stages)."""
    wall_s: float
    store: str

    @property
    def per_hour(self) -> float:
        return 3600 * len(self.rollouts) / self.wall_s if self.wall_s > 0 else 0.0


def run_rollouts(
    tasks: list[Task],
    make_model: ModelFactory,
    *,
    samples: int,
    concurrency: int,
    evaluator: Evaluator,
    options: JudgingOptions,
    out: Path,
    config: RolloutConfig | None = None,
    max_turns: int = 40,
    model_name: str = "",
) -> RolloutsReport:
    """`samples` rollouts of every task, `concurrency` at a time (threads; the evaluator bounds
    compiles and GPU work itself), into `out`: a batch store and one folder per rollout."""
    config = config or RolloutConfig(referee=options.referee(), sandbox="local")
    out.mkdir(parents=True, exist_ok=True)
    batch = BatchConfig(
        tasks=sorted({t.path for t in tasks}),
        mode="agent",
        model=model_name or f"rollouts:{make_model.__name__}",
        samples=samples,
        out=out,
        store=out / "store.sqlite",
        concurrency=concurrency,
        eval=options,
    )
    referee = DedupReferee(BatchReferee(evaluator, options, gpu_name="the batch's evaluator"))
    started = time.monotonic()
    with Store(batch.store) as store:
        store.migrate()
        run_id = store.start_run(batch, versions=versions(), gpus=[])
        store.add_tasks(tasks)
        items = [WorkItem(task=t, candidate=f"sample_{i}") for t in tasks for i in range(samples)]
        rollout = _Rollout(store, run_id, batch.batch_key(), referee, make_model, config, max_turns, out)
        with concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="rollout") as pool:
            records = list(pool.map(rollout.run, items))
        store.finish_run(run_id, "finished")
    done = [r for r in records if r is not None]
    return RolloutsReport(
        rollouts=done,
        skipped=len(records) - len(done),
        judged=referee.judged,
        reused=referee.reused,
        gpu_s=sum(r.stage_times.candidate_s + r.stage_times.judge_s for r in referee.results),
        stages=stage_breakdown(referee.results),
        wall_s=time.monotonic() - started,
        store=str(batch.store),
    )


@dataclass
class _Rollout:
    store: Store
    run_id: int
    batch_key: str
    referee: Referee
    make_model: ModelFactory
    config: RolloutConfig
    max_turns: int
    out: Path
    _store_lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, item: WorkItem) -> RolloutRecord | None:
        with self._store_lock:
            claim = self.store.claim(self.run_id, self.batch_key, item)
        if claim is None:
            return None
        folder = self.out / "rollouts" / item.task.name / item.candidate
        started = time.monotonic()
        config = self.config.model_copy(
            update={"budget": self.config.budget.model_copy(update={"turns": self.max_turns})}
        )
        session = KernelSession.open(item.task, root=folder, referee=self.referee, config=config)
        try:
            converse(session, self.make_model(item.task), folder / TRANSCRIPT)
        finally:
            outcome = session.finish()
        (folder / OUTCOME).write_text(outcome.model_dump_json(indent=1))
        wall_s = time.monotonic() - started
        result = EvalResult.model_validate(outcome.result) if outcome.result else None
        with self._store_lock:
            self.store.set_output_dir(claim.attempt_id, folder)
            self.store.finish_attempt(
                claim.attempt_id,
                AttemptRecord(
                    status="done",
                    result=result,
                    wall_s=wall_s,
                    transcript_path=str(folder / TRANSCRIPT),
                    error=outcome.reason if outcome.failed else None,
                ),
            )
        return RolloutRecord(
            task=item.task.key,
            sample=item.candidate,
            outcome=outcome,
            wall_s=wall_s,
            transcript=str(folder / TRANSCRIPT),
        )


def converse(session: KernelSession, model: Model, transcript: Path) -> None:
    """The model and the session's tools through the agent loop, each call through
    `session.execute` (so a crash, hang or flood is a failed sample), written to `transcript` as
    `agent solve` writes its own. Ends when the session does, when the model answers without a tool
    call, or when the session's budget (its turns: `max_turns`) runs out."""
    task, context = session.task, session.context
    gpu = context.referee.device()
    prompts = run_prompts(task, session.config.referee, baseline="eager", gpu=gpu, budget_line="")
    header = transcript_header(
        task,
        model=getattr(model, "name", "model"),
        config={"rollout": session.config.model_dump(mode="json"), "max_turns": session.config.budget.turns},
        tools=session.tool_specs,
        prompt_hashes=prompts.hashes,
        gpu=gpu,
        sandbox=session.sandbox.describe(),
    )

    def execute(call: ToolCall) -> ToolOutput:
        output = session.execute(call)
        # The text keeps the MCP channel's "ERROR: " mark, so both RL paths show the model one text.
        return replace(output, content=output.as_text())

    with TranscriptWriter(transcript, header) as writer:
        loop = AgentLoop(
            model,
            session.toolbox,
            context,
            writer,
            max_idle_turns=1,
            window=ContextWindow(ContextLimits(ceiling_tokens=0)),
            execute=execute,
        )
        outcome = loop.run([SystemMessage(text=prompts.system), UserMessage(text=prompts.task)])
        session.end(outcome.status, outcome.message)
        writer.write(
            RunEndEvent(
                turn=context.turn,
                status=session.stop_status or "error",
                message=session.reason,
                usage=context.budget.usage(),
            )
        )
