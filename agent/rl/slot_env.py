"""The template policy's slot decisions as a gymnasium-style environment.

One `SlotEnv` is one task's template plan (agent/templates): its `SlotSpace` (slots.py), the
decision makers' first guess, and an evaluator that judges a slot assignment. An action is a
batch of slot assignments, the reward the rank of each one's time within that batch:

    env = SlotEnv(SlotTask.from_file("level1/19_ReLU.py"), batch_size=4)
    obs, info = env.reset(seed=0)
    obs, rewards, terminated, truncated, info = env.step([assignment_1, assignment_2])

- An assignment is a dict {slot name: value} (values from each slot's own domain, e.g.
  S0_BLOCK=256), or a sequence of indices into each slot's values in `info["slot_names"]`
  order (what gymnasium's `MultiDiscrete` samples). A batch is a list of them (a single dict or
  a flat list of ints is a batch of one; a 2-D array is a batch, one row per candidate).
- Invalid (a missing or unknown slot, a value outside a slot's domain, an index out of range, a
  broken constraint such as `S0_VEC == 1 or S0_CAN_VEC >= S0_VEC`, more candidates than
  `batch_size`): never evaluated, reward 0, `info["invalid"][i]` the reason (None for a valid
  one) and `info["candidates"][i]["repaired"]` the nearest valid point (`SlotSpace.repair`).
- Reward (`rank_rewards`): m candidates in the batch; the timed ones sorted by time, the one at
  0-based position r gets (m - r) / m, so the fastest gets 1 and the slowest timed one 1/m;
  failures and invalid ones get 0 (they rank last, as the search ranks them). Ties (times
  within `tie_rtol` of the fastest of their group, default the search's 1 % noise floor; exact
  ties always) share the mean of their positions' rewards. A failure is a build error, a wrong
  answer, an evaluator that raised, or a candidate judged correct without a time (a
  compile-only dry run).
- Evaluation is injectable: `evaluate(task, assignment) -> ms | None | str | Outcome` (a float
  is the median time in ms, None or a string a failure and its reason, an `Outcome` as the
  search records it). The default, `PolicyEvaluator`, is the template policy's own path:
  `TemplatePolicy` instantiates the files and builds its candidate turn (write_file for changed
  files, compile, profile: `candidate_turn`), the agent loop runs it through our tools in a
  `KernelSession` with the referee, and the policy reads the verdict back (`read_verdict`),
  identical sources judged once (`candidate_hash`).
  Every assignment is judged once per env (a cache by slot key, kept across resets).
- Episodes: `reset` clears the episode (its times, incumbent, steps); truncated after
  `max_steps` steps; never terminated (there is no terminal state).

With gymnasium installed (the `rl` extra) `SlotEnv` is a `gymnasium.Env` with a
`MultiDiscrete((batch_size, n_slots))` action space and a `Dict` observation space; without it
the same observation is a dict of plain lists and the class is a plain object.
`SlotVectorEnv` steps several tasks' envs, one after another (not a gymnasium `VectorEnv`:
tasks have different slot spaces).
"""

from __future__ import annotations

import importlib
import math
import numbers
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.messages import Message, ModelResponse, ToolCall, ToolSpec
from agent.models.registry import TEMPLATES_MODEL
from agent.rl.session import KernelSession, RolloutConfig
from agent.run.loop import AgentLoop
from agent.stops import RunStop
from agent.templates.plan import NotCovered, Plan
from agent.templates.search import NOISE_FLOOR, Outcome, Proposal
from agent.templates.slots import Config, Observation, SlotSpace, default_makers, initial_config
from agent.tools import ToolOutput
from agent.tools.candidates import Referee
from agent.tune.space import DeviceLimits

if TYPE_CHECKING:
    from agent.templates.policy import TemplatePolicy

try:  # optional: the `rl` extra
    gym: Any = importlib.import_module("gymnasium")
    np: Any = importlib.import_module("numpy")
except ImportError:  # pragma: no cover - exercised where gymnasium is missing
    gym, np = None, None

HAS_GYMNASIUM = gym is not None
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool", "other")
GPU_FIELDS = ("sm_count", "max_shared", "max_shared_optin", "max_threads", "warp_size")
_BIG = 1.0e300  # finite bound for Box spaces (gymnasium warns about infinite ones)

Judgement = float | int | str | Outcome | None
ConfigJudge = Callable[["SlotTask", Config], Judgement]


@dataclass
class SlotTask:
    """One task's plan and slot space, as the template policy builds them."""

    plan: Plan
    path: Path | None = None
    gpu: DeviceLimits = field(default_factory=DeviceLimits)
    allow_tf32: bool = False
    space: SlotSpace = field(init=False)

    def __post_init__(self) -> None:
        self.space = SlotSpace(self.plan, self.gpu, allow_tf32=self.allow_tf32)

    @property
    def name(self) -> str:
        return self.plan.task

    @classmethod
    def from_file(cls, path: Path | str, **options: Any) -> SlotTask:
        return cls.from_files([path], **options)[0]

    @classmethod
    def from_files(
        cls,
        paths: Sequence[Path | str],
        *,
        gpu: DeviceLimits | None = None,
        allow_tf32: bool = False,
        sandbox_kind: str = "local",
    ) -> list[SlotTask]:
        """Trace the tasks (one sandbox run) and recognize their plans; ValueError for a task
        the template library does not cover or cannot trace."""
        from agent.templates import OpGraph, recognize, trace_tasks

        files = [Path(p) for p in paths]
        tasks = []
        for path, graph in zip(files, trace_tasks(files, sandbox_kind=sandbox_kind), strict=True):
            plan = (
                recognize(graph)
                if isinstance(graph, OpGraph)
                else NotCovered(task=path.stem, reason=str(graph))
            )
            if isinstance(plan, NotCovered):
                raise ValueError(f"{path}: {plan.reason}")
            tasks.append(cls(plan, path=path, gpu=gpu or DeviceLimits(), allow_tf32=allow_tf32))
        return tasks


# -- the default evaluator: the template policy's own candidate path --------------------------------
@dataclass
class _PolicyRun:
    policy: TemplatePolicy
    session: KernelSession | None = None


@dataclass
class _CandidateTurn:
    """The loop's model for one candidate: the template policy's turn that builds and judges it."""

    policy: TemplatePolicy
    proposal: Proposal
    name: str = TEMPLATES_MODEL

    def query(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], *, max_output_tokens: int | None = None
    ) -> ModelResponse:
        message = self.policy.candidate_turn(self.proposal, judge=True)
        return ModelResponse(message=message, cost_usd=0.0, stop_reason="tool_use", model=self.name)


@dataclass
class _UntilCompileFails:
    """The session's tool executor, skipping what follows a failed compile (a profile would only
    rebuild the same broken sources)."""

    session: KernelSession
    compile_failed: bool = False

    def __call__(self, call: ToolCall) -> ToolOutput:
        if self.compile_failed:
            return ToolOutput(f"{call.name}: not run, the compile failed", is_error=True)
        output = self.session.execute(call)
        self.compile_failed = call.name == "compile" and output.is_error
        return output


class _NoTranscript:
    def write(self, event: object) -> object:
        return event


@dataclass
class PolicyEvaluator:
    """Judges an assignment the way `TemplatePolicy` judges its candidates: its files
    (`instantiate`), its candidate turn (write_file for what changed, compile, profile) run by the
    agent loop (one step) over one `KernelSession` per task (the referee given, else the real one:
    it needs the GPU), its reading of the verdict, its content-hash dedup. A session that fails
    (crash, hang) fails that candidate and a fresh one is opened for the next."""

    referee: Referee | None = None
    config: RolloutConfig = field(default_factory=lambda: RolloutConfig(max_tool_calls=1_000_000))
    root: Path | None = None
    _runs: dict[str, _PolicyRun] = field(default_factory=dict)

    def __call__(self, task: SlotTask, assignment: Config) -> Outcome:
        from agent.templates.policy import TemplatePolicy

        run = self._runs.get(task.name)
        if run is None:
            policy = TemplatePolicy(task.plan, gpu=task.gpu, allow_tf32=task.allow_tf32)
            run = self._runs[task.name] = _PolicyRun(policy)
        policy = run.policy
        proposal = Proposal(dict(assignment), "env")
        digest = policy.candidate_hash(proposal)
        known = policy.by_hash.get(digest)
        if known is not None:
            return known
        if run.session is None or run.session.done:
            run.session = self._open(task)
            policy.forget_files()
        session = run.session
        loop = AgentLoop(
            _CandidateTurn(policy, proposal),
            session.toolbox,
            session.context,
            _NoTranscript(),
            execute=_UntilCompileFails(session),
        )
        try:
            loop.step()
        except RunStop as stop:  # the session ended (a crash, a hang, the budget): the next one is fresh
            session.end(stop.status, str(stop))
        if session.done:
            outcome = Outcome(False, reason=session.reason)
        else:
            outcome = policy.read_verdict(loop.messages) or Outcome(False, reason="no verdict came back")
        policy.by_hash[digest] = outcome
        return outcome

    def _open(self, task: SlotTask) -> KernelSession:
        from agent.tasks import load_task

        if task.path is None:
            raise ValueError(f"{task.name}: the default evaluator needs the task's file (SlotTask.path)")
        root = None if self.root is None else self.root / task.name
        return KernelSession.open(load_task(task.path), root=root, referee=self.referee, config=self.config)

    def close(self) -> None:
        for run in self._runs.values():
            if run.session is not None:
                run.session.close()
        self._runs.clear()


# -- rewards --------------------------------------------------------------------------------------
def rank_rewards(times: Sequence[float | None], tie_rtol: float = NOISE_FLOOR) -> list[float]:
    """Rank rewards in [0, 1] for one batch: None is a failure (0); of m candidates the timed one
    at position r (fastest first) gets (m - r) / m; a group of ties (within `tie_rtol` of the
    group's fastest) shares the mean of its positions' rewards."""
    m = len(times)
    rewards = [0.0] * m
    timed = sorted((t, i) for i, t in enumerate(times) if t is not None)
    position = 0
    while position < len(timed):
        end = position + 1
        while end < len(timed) and timed[end][0] <= timed[position][0] * (1 + tie_rtol):
            end += 1
        share = sum((m - r) / m for r in range(position, end)) / (end - position)
        for _, i in timed[position:end]:
            rewards[i] = share
        position = end
    return rewards


# -- the environment --------------------------------------------------------------------------------
_Base: Any = gym.Env if gym is not None else object


class SlotEnv(_Base):
    """One task's slot decisions: reset() -> (obs, info), step(batch) -> (obs, rewards, terminated,
    truncated, info). See the module docstring for the action, reward and observation."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium's class attribute

    def __init__(
        self,
        task: SlotTask,
        evaluate: ConfigJudge | None = None,
        *,
        batch_size: int = 4,
        max_steps: int = 8,
        tie_rtol: float = NOISE_FLOOR,
    ) -> None:
        self.task = task
        self.space = task.space
        self.evaluate: ConfigJudge = evaluate or PolicyEvaluator()
        self.batch_size = batch_size
        self.max_steps = max_steps
        self.tie_rtol = tie_rtol
        self.slot_names = list(self.space.slots)
        self.slot_values = {n: list(s.values) for n, s in self.space.slots.items()}
        gpu_names = dict(task.gpu.names())
        self.size_names = [k for k in self.space.env if k not in gpu_names]
        self.buffer_names = list(task.plan.buffers)
        self.initial = initial_config(self.space, default_makers(), Observation(task.plan, task.gpu))
        self.cache: dict[str, Outcome] = {}
        self.evaluations = 0  # evaluator calls (cache misses), over the env's life
        self._rng = random.Random()
        self._steps = 0
        self._times: dict[str, float | None] = {}
        self._incumbent: Config | None = None
        self._best: float | None = None
        self._last: list[dict[str, Any]] = []
        if gym is not None:
            self.action_space, self.observation_space = self._spaces()

    # -- gymnasium's contract ---------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if gym is not None:
            super().reset(seed=seed)
        self._rng = random.Random(seed)
        if options and options.get("clear_cache"):
            self.cache.clear()
        self._steps, self._times, self._incumbent, self._best, self._last = 0, {}, None, None, []
        info = {
            "task": self.task.name,
            "slot_names": list(self.slot_names),
            "slot_values": {n: list(v) for n, v in self.slot_values.items()},
            "dimensions": {n: s.dimension for n, s in self.space.slots.items()},
            "size_names": list(self.size_names),
            "buffer_names": list(self.buffer_names),
            "dtype_names": list(DTYPES),
            "constraints": [text for checks in self.space.checks.values() for text, _ in checks],
            "initial": dict(self.initial),
        }
        return self._observation(), info

    def step(self, action: Any) -> tuple[dict[str, Any], list[float], bool, bool, dict[str, Any]]:
        batch = self._batch(action)
        candidates: list[dict[str, Any]] = []
        for index, item in enumerate(batch):
            config, reason = self._parse(item)
            if reason is None and index >= self.batch_size:
                reason = f"the batch holds at most {self.batch_size} candidates"
            entry: dict[str, Any] = {"assignment": config, "invalid": reason, "ok": False, "ms": None}
            if reason is not None:
                entry["reason"] = reason
                entry["repaired"] = self._repaired(config)
            else:
                assert config is not None
                outcome = self._judge(config)
                timed = outcome.ok and outcome.ms is not None
                entry.update(
                    ok=timed,
                    ms=outcome.ms if timed else None,
                    iqr_ms=outcome.iqr_ms,
                    reason=outcome.reason or ("correct" if timed else "failed"),
                )
                key = self.space.key(config)
                self._times[key] = entry["ms"]
                if timed and outcome.ms is not None and (self._best is None or outcome.ms < self._best):
                    self._incumbent, self._best = dict(config), outcome.ms
            candidates.append(entry)
        rewards = rank_rewards([c["ms"] for c in candidates], self.tie_rtol)
        for entry, reward in zip(candidates, rewards, strict=True):
            entry["reward"] = reward
        self._last = candidates[: self.batch_size]
        self._steps += 1
        info = {
            "candidates": candidates,
            "invalid": [c["invalid"] for c in candidates],
            "times": dict(self._times),
            "incumbent": dict(self._incumbent) if self._incumbent is not None else None,
            "best_ms": self._best,
        }
        truncated = self._steps >= self.max_steps
        return self._observation(), rewards, False, truncated, info

    def close(self) -> None:
        close = getattr(self.evaluate, "close", None)
        if callable(close):
            close()

    # -- helpers for policies -----------------------------------------------------------------------
    def sample(self, valid: bool = True) -> Config:
        """A random assignment (seeded by reset): a uniformly drawn valid point per stage, or with
        valid=False any value per slot."""
        if not valid:
            return {n: self._rng.choice(v) for n, v in self.slot_values.items()}
        config: Config = {}
        for stage in self.task.plan.stages:
            config.update(self._rng.choice(self.space.valid_points(stage.name)))
        return config

    def indices(self, config: Config) -> list[int]:
        """An assignment as indices into each slot's values (the MultiDiscrete form)."""
        return [self.slot_values[n].index(config[n]) for n in self.slot_names]

    # -- internals ----------------------------------------------------------------------------------
    def _judge(self, config: Config) -> Outcome:
        key = self.space.key(config)
        if key not in self.cache:
            self.evaluations += 1
            try:
                outcome = _as_outcome(self.evaluate(self.task, dict(config)))
            except Exception as exc:
                outcome = Outcome(False, reason=f"the evaluator raised {type(exc).__name__}: {exc}")
            self.cache[key] = outcome
        return self.cache[key]

    def _batch(self, action: Any) -> list[Any]:
        if hasattr(action, "tolist"):
            action = action.tolist()
        if isinstance(action, Mapping):
            return [action]
        if isinstance(action, Sequence) and not isinstance(action, str | bytes):
            items = list(action)
            if items and all(_is_int(v) for v in items):
                return [items]  # one assignment as indices
            return items
        return [action]

    def _parse(self, item: Any) -> tuple[Config | None, str | None]:
        """(config, None) for a valid assignment, (config or None, reason) for an invalid one."""
        if hasattr(item, "tolist"):
            item = item.tolist()
        if isinstance(item, Mapping):
            unknown = [str(k) for k in item if k not in self.space.slots]
            missing = [n for n in self.slot_names if n not in item]
            if unknown or missing:
                parts = [f"unknown slot(s) {unknown}"] * bool(unknown) + [
                    f"missing slot(s) {missing}"
                ] * bool(missing)
                return None, "; ".join(parts)
            bad = [f"{n}={item[n]!r} is not an integer" for n in self.slot_names if not _is_int(item[n])]
            if bad:
                return None, "; ".join(bad)
            config = {n: int(item[n]) for n in self.slot_names}
        elif isinstance(item, Sequence) and not isinstance(item, str | bytes):
            if len(item) != len(self.slot_names):
                return None, f"{len(item)} values for {len(self.slot_names)} slots {self.slot_names}"
            config = {}
            for name, index in zip(self.slot_names, item, strict=True):
                values = self.slot_values[name]
                if not _is_int(index) or not 0 <= int(index) < len(values):
                    return None, f"{name}: index {index!r} is not in range(0, {len(values)})"
                config[name] = values[int(index)]
        else:
            return None, f"not an assignment: {type(item).__name__}"
        violations = self.space.violations(config)
        return (config, "; ".join(violations)) if violations else (config, None)

    def _repaired(self, config: Config | None) -> Config | None:
        if config is None:
            return None
        values = {n: v for n, v in config.items() if n in self.space.slots}
        return self.space.repair(values)

    def _observation(self) -> dict[str, Any]:
        """What the decision makers observe: sizes, dtypes, the GPU, the incumbent and the last
        batch (times 0.0 where there is none: failed, invalid or padding; `last_valid` marks)."""
        incumbent = self._incumbent or self.initial
        sizes = [float(self.space.env[k]) for k in self.size_names]
        dtypes = [_dtype_code(self.task.plan.buffers[b].dtype) for b in self.buffer_names]
        gpu = [float(getattr(self.task.gpu, f)) for f in GPU_FIELDS]
        pad = self.batch_size - len(self._last)
        last_assign = [self._safe_indices(c["assignment"]) for c in self._last] + [
            [0] * len(self.slot_names)
        ] * pad
        last_times = [float(c["ms"] or 0.0) for c in self._last] + [0.0] * pad
        last_rewards = [float(c["reward"]) for c in self._last] + [0.0] * pad
        last_valid = [int(c["ms"] is not None) for c in self._last] + [0] * pad
        obs: dict[str, Any] = {
            "sizes": sizes,
            "dtypes": dtypes,
            "gpu": gpu,
            "incumbent": self.indices(incumbent),
            "best_ms": [float(self._best or 0.0)],
            "last_assignments": last_assign,
            "last_times": last_times,
            "last_rewards": last_rewards,
            "last_valid": last_valid,
            "step": self._steps,
        }
        if np is None:
            return obs
        floats = ("sizes", "gpu", "best_ms", "last_times", "last_rewards")
        ints = ("dtypes", "incumbent", "last_assignments", "last_valid")
        out: dict[str, Any] = {k: np.asarray(obs[k], dtype=np.float64) for k in floats}
        out.update({k: np.asarray(obs[k], dtype=np.int64) for k in ints})
        out["step"] = int(self._steps)
        return out

    def _safe_indices(self, config: Config | None) -> list[int]:
        if config is None:
            return [0] * len(self.slot_names)
        return [
            self.slot_values[n].index(config[n]) if config.get(n) in self.slot_values[n] else 0
            for n in self.slot_names
        ]

    def _spaces(self) -> tuple[Any, Any]:
        spaces = gym.spaces
        nvec = [len(self.slot_values[n]) for n in self.slot_names]
        batch_nvec = np.tile(np.asarray(nvec, dtype=np.int64), (self.batch_size, 1))

        def box(n: int, high: float = _BIG) -> Any:
            return spaces.Box(low=0.0, high=high, shape=(n,), dtype=np.float64)

        action_space = spaces.MultiDiscrete(batch_nvec)
        observation_space = spaces.Dict(
            {
                "sizes": box(len(self.size_names)),
                "dtypes": spaces.MultiDiscrete([len(DTYPES)] * len(self.buffer_names)),
                "gpu": box(len(GPU_FIELDS)),
                "incumbent": spaces.MultiDiscrete(nvec),
                "best_ms": box(1),
                "last_assignments": spaces.MultiDiscrete(batch_nvec),
                "last_times": box(self.batch_size),
                "last_rewards": box(self.batch_size, 1.0),
                "last_valid": spaces.MultiBinary(self.batch_size),
                "step": spaces.Discrete(self.max_steps + 1),
            }
        )
        return action_space, observation_space


class SlotVectorEnv:
    """Several tasks' `SlotEnv`s stepped together, one after another in this process (the
    evaluations are sequential; the spaces differ per task, so this is a list of envs, not a
    gymnasium `VectorEnv`). With `autoreset`, an env whose episode ended is reset after its step
    and its last observation is kept in that info's "final_observation"."""

    def __init__(self, envs: Sequence[SlotEnv], *, autoreset: bool = False) -> None:
        self.envs = list(envs)
        self.autoreset = autoreset

    @classmethod
    def from_tasks(
        cls, tasks: Sequence[SlotTask], evaluate: ConfigJudge | None = None, **options: Any
    ) -> SlotVectorEnv:
        autoreset = options.pop("autoreset", False)
        shared = evaluate or PolicyEvaluator()
        return cls([SlotEnv(t, shared, **options) for t in tasks], autoreset=autoreset)

    @property
    def num_envs(self) -> int:
        return len(self.envs)

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(len(self.envs))]
        else:
            seeds = list(seed)
        pairs = [env.reset(seed=s, options=options) for env, s in zip(self.envs, seeds, strict=True)]
        return [o for o, _ in pairs], [i for _, i in pairs]

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[list[dict[str, Any]], list[list[float]], list[bool], list[bool], list[dict[str, Any]]]:
        if len(actions) != len(self.envs):
            raise ValueError(f"{len(actions)} actions for {len(self.envs)} envs")
        obs, rewards, terms, truncs, infos = [], [], [], [], []
        for env, action in zip(self.envs, actions, strict=True):
            o, r, term, trunc, info = env.step(action)
            if self.autoreset and (term or trunc):
                info = {**info, "final_observation": o}
                o, _ = env.reset()
            obs.append(o)
            rewards.append(r)
            terms.append(term)
            truncs.append(trunc)
            infos.append(info)
        return obs, rewards, terms, truncs, infos

    def close(self) -> None:
        closed: set[int] = set()
        for env in self.envs:
            if id(env.evaluate) not in closed:
                closed.add(id(env.evaluate))
                env.close()


def _as_outcome(value: Judgement) -> Outcome:
    if isinstance(value, Outcome):
        return value
    if value is None:
        return Outcome(False, reason="failed")
    if isinstance(value, str):
        return Outcome(False, reason=value)
    if isinstance(value, bool) or not math.isfinite(float(value)) or float(value) <= 0:
        return Outcome(False, reason=f"not a time: {value!r}")
    return Outcome(True, ms=float(value), reason="correct")


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _dtype_code(dtype: str) -> int:
    return DTYPES.index(dtype) if dtype in DTYPES else DTYPES.index("other")
