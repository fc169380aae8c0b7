"""The slot-decision environment (agent/rl/slot_env.py) on real KernelBench plans (19_ReLU, an
elementwise stage; 23_Softmax, whose D=393216 row cannot use the shared-memory cache) with fake
timings: the reset/step contract, rank rewards with ties and failures, invalid assignments,
the vector env, gymnasium's check_env, and (slow) the default evaluator through the template
policy's own candidate turn with a real compile and a scripted verdict."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from agent.rl.slot_env import HAS_GYMNASIUM, PolicyEvaluator, SlotEnv, SlotTask, SlotVectorEnv, rank_rewards
from agent.templates.search import Outcome

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = REPO.parent / "shared" / "kernelbench" / "level1"
if not KERNELBENCH.is_dir():
    KERNELBENCH = Path("/work/shared/kernelbench/level1")
RELU, SOFTMAX = KERNELBENCH / "19_ReLU.py", KERNELBENCH / "23_Softmax.py"


@pytest.fixture(scope="module")
def tasks() -> dict[str, SlotTask]:
    if not RELU.is_file():
        pytest.skip(f"KernelBench level 1 not found under {KERNELBENCH}")
    relu, softmax = SlotTask.from_files([RELU, SOFTMAX])
    return {"relu": relu, "softmax": softmax}


def cost(task: SlotTask, config: dict[str, int]) -> float:
    """A made-up time: fastest with the widest vector and a block of 512."""
    block = next(v for k, v in config.items() if k.endswith("_BLOCK"))
    vec = next(v for k, v in config.items() if k.endswith("_VEC"))
    return 1.0 + abs(block - 512) / 1024 + (4 - vec) * 0.25


class Recorder:
    def __init__(self, fn=cost) -> None:
        self.fn, self.calls = fn, []

    def __call__(self, task: SlotTask, config: dict[str, int]):
        self.calls.append(dict(config))
        return self.fn(task, config)


def relu(block: int = 256, vec: int = 4, unroll: int = 2, fast: int = 0, grid: int = 1024) -> dict[str, int]:
    return {"S0_BLOCK": block, "S0_GRID_PER_SM": grid, "S0_VEC": vec, "S0_UNROLL": unroll, "S0_FAST": fast}


@pytest.mark.slow
def test_reset_and_step_contract(tasks) -> None:
    env = SlotEnv(tasks["relu"], Recorder(), batch_size=3, max_steps=2)
    obs, info = env.reset(seed=0)
    assert info["slot_names"] == ["S0_BLOCK", "S0_GRID_PER_SM", "S0_VEC", "S0_UNROLL", "S0_FAST"]
    assert info["slot_values"]["S0_VEC"] == [1, 2, 4] and info["dimensions"]["S0_VEC"] == "memory"
    assert info["initial"] == relu()  # the decision makers' first guess
    assert any("S0_CAN_VEC" in c for c in info["constraints"])
    sizes = dict(zip(info["size_names"], list(obs["sizes"]), strict=True))
    assert sizes["S0_N"] == 1610612736 and sizes["S0_CAN_VEC"] == 4  # 4096 x 393216 floats
    assert [info["dtype_names"][d] for d in obs["dtypes"]] == ["float32"] * len(info["buffer_names"])
    assert list(obs["gpu"]) == [132, 48 * 1024, 227 * 1024, 1024, 32]  # sm_count, shared memory, ...
    assert list(obs["incumbent"]) == env.indices(info["initial"]) and list(obs["best_ms"]) == [0.0]
    assert list(obs["last_valid"]) == [0, 0, 0] and obs["step"] == 0

    obs, rewards, terminated, truncated, info = env.step([relu(512), relu(256, vec=1)])
    assert isinstance(rewards, list) and len(rewards) == 2
    assert rewards == [1.0, 0.5]  # of m=2: the fastest 1, the other (2 - 1) / 2
    assert terminated is False and truncated is False
    assert info["invalid"] == [None, None]
    assert [c["ms"] for c in info["candidates"]] == [1.0, 1.0 + 256 / 1024 + 0.75]
    assert info["incumbent"] == relu(512) and info["best_ms"] == 1.0
    assert list(obs["last_times"]) == [1.0, 2.0, 0.0] and list(obs["last_valid"]) == [1, 1, 0]
    assert list(obs["last_rewards"]) == [1.0, 0.5, 0.0] and list(obs["best_ms"]) == [1.0]
    assert list(obs["incumbent"]) == env.indices(relu(512)) and obs["step"] == 1

    # indices (the MultiDiscrete form), a batch of one as a flat list
    _, rewards, _, truncated, info = env.step(env.indices(relu(1024)))
    assert rewards == [1.0] and info["candidates"][0]["assignment"] == relu(1024)
    assert truncated is True  # max_steps=2

    obs, info = env.reset(seed=0)
    assert obs["step"] == 0 and list(obs["best_ms"]) == [0.0]
    assert env.evaluations == 3  # the cache outlives the episode
    env.step([relu(512)])
    assert env.evaluations == 3
    env.reset(options={"clear_cache": True})
    env.step([relu(512)])
    assert env.evaluations == 4


def test_rank_rewards_ties_and_failures() -> None:
    assert rank_rewards([]) == []
    assert rank_rewards([3.0]) == [1.0]
    assert rank_rewards([None]) == [0.0]
    # m=4: two tied fastest share the rewards of positions 0 and 1, the failure gets 0
    assert rank_rewards([2.0, 1.0, None, 1.0]) == [0.5, 0.875, 0.0, 0.875]
    # within the 1 % noise floor is a tie; beyond it is not
    assert rank_rewards([1.0, 1.005, 1.5]) == pytest.approx([5 / 6, 5 / 6, 1 / 3])
    assert rank_rewards([1.0, 1.005, 1.5], tie_rtol=0.0) == pytest.approx([1.0, 2 / 3, 1 / 3])
    assert rank_rewards([None, None, 4.0, 2.0]) == [0.0, 0.0, 0.75, 1.0]


def test_step_ranks_ties_failures_and_evaluator_errors(tasks) -> None:
    def judge(task: SlotTask, config: dict[str, int]):
        if config["S0_UNROLL"] == 4:
            return None  # a failure without a reason
        if config["S0_UNROLL"] == 1:
            return "compile error: kernels/s0_ewise.cu:12: error"
        if config["S0_FAST"] == 1:
            raise RuntimeError("referee crashed")
        if config["S0_GRID_PER_SM"] == 8:
            return Outcome(True, reason="compiled (no GPU to judge it)")  # correct, untimed
        return Outcome(True, ms=cost(task, config), iqr_ms=0.01)

    env = SlotEnv(tasks["relu"], judge, batch_size=6)
    env.reset()
    batch = [relu(512), relu(1024), relu(512, unroll=4), relu(unroll=1), relu(fast=1), relu(grid=8)]
    _, rewards, _, _, info = env.step(batch)
    # relu(512) 1.0 ms and relu(1024) 1.5 ms; relu(512, unroll=4) has the same cost but failed
    assert rewards == pytest.approx([1.0, 5 / 6, 0.0, 0.0, 0.0, 0.0])
    reasons = [c["reason"] for c in info["candidates"]]
    assert reasons[2] == "failed" and reasons[3].startswith("compile error")
    assert reasons[4] == "the evaluator raised RuntimeError: referee crashed"
    assert reasons[5] == "compiled (no GPU to judge it)" and info["candidates"][5]["ok"] is False
    assert info["invalid"] == [None] * 6

    # exact ties share their positions' rewards
    env2 = SlotEnv(tasks["relu"], lambda task, config: 2.0, batch_size=3)
    env2.reset()
    _, rewards, _, _, _ = env2.step([relu(128), relu(256), relu(512)])
    assert rewards == pytest.approx([2 / 3] * 3)


def test_invalid_assignments_score_zero_and_are_not_evaluated(tasks) -> None:
    recorder = Recorder()
    env = SlotEnv(tasks["softmax"], recorder, batch_size=4)
    _, info = env.reset()
    names = info["slot_names"]
    assert names == ["S0_BLOCK", "S0_VEC", "S0_FAST", "S0_STRATEGY", "S0_ALGO", "S0_CLUSTER"]
    good = dict(info["initial"])
    assert good["S0_CLUSTER"] > 1  # the row is cached by a cluster's blocks
    cached = {**good, "S0_STRATEGY": 1, "S0_CLUSTER": 1}  # a 393216-float row does not fit in one block
    batch = [
        good,
        cached,
        {**good, "S0_VEC": 3},  # not one of the slot's values
        {k: v for k, v in good.items() if k != "S0_FAST"},  # a missing slot
    ]
    _, rewards, _, _, info = env.step(batch)
    assert rewards == [1.0, 0.0, 0.0, 0.0]
    invalid = info["invalid"]
    assert invalid[0] is None
    assert "max_shared_optin" in invalid[1] and "S0_ALGO != 2" in invalid[1]
    assert invalid[2] == "S0_VEC=3 is not one of (1, 2, 4)"
    assert invalid[3] == "missing slot(s) ['S0_FAST']"
    assert info["candidates"][1]["repaired"]["S0_ALGO"] != 2  # the nearest valid point, as a hint
    assert recorder.calls == [good]

    # more of them: indices out of range, wrong lengths, junk, unknown slots, a batch too large
    _, rewards, _, _, info = env.step(
        [[0, 0, 0, 0, 9, 0], [0, 1], "S0_BLOCK=64", {**good, "S1_BLOCK": 64}, good]
    )
    assert rewards == [0.0] * 5
    assert info["invalid"][0] == "S0_ALGO: index 9 is not in range(0, 3)"
    assert info["invalid"][1].startswith("2 values for 6 slots")
    assert info["invalid"][2] == "not an assignment: str"
    assert info["invalid"][3] == "unknown slot(s) ['S1_BLOCK']"
    assert info["invalid"][4] == "the batch holds at most 4 candidates"
    assert recorder.calls == [good]


def test_sample_gives_valid_assignments(tasks) -> None:
    env = SlotEnv(tasks["softmax"], Recorder(), batch_size=8)
    env.reset(seed=3)
    batch = [env.sample() for _ in range(8)]
    env.reset(seed=3)
    assert [env.sample() for _ in range(8)] == batch
    _, rewards, _, _, info = env.step(batch)
    assert info["invalid"] == [None] * 8 and max(rewards) == 1.0


def test_vector_env_steps_every_task(tasks) -> None:
    recorder = Recorder()
    vec = SlotVectorEnv.from_tasks([tasks["relu"], tasks["softmax"]], recorder, batch_size=2, max_steps=1)
    assert vec.num_envs == 2
    obs, infos = vec.reset(seed=7)
    assert [i["task"] for i in infos] == ["19_ReLU", "23_Softmax"]
    too_long = {**infos[1]["initial"], "S0_STRATEGY": 1, "S0_CLUSTER": 1}  # the row in one block's cache
    actions = [[relu(512), relu(128)], [infos[1]["initial"], too_long]]
    obs, rewards, terms, truncs, infos = vec.step(actions)
    assert rewards == [[1.0, 0.5], [1.0, 0.0]]
    assert terms == [False, False] and truncs == [True, True]
    assert infos[1]["invalid"][0] is None and infos[1]["invalid"][1]
    assert len(recorder.calls) == 3 and len(obs) == 2
    with pytest.raises(ValueError):
        vec.step([[relu()]])

    auto = SlotVectorEnv.from_tasks([tasks["relu"]], recorder, batch_size=2, max_steps=1, autoreset=True)
    auto.reset()
    obs, _, _, truncs, infos = auto.step([[relu(512)]])
    assert truncs == [True] and obs[0]["step"] == 0 and infos[0]["final_observation"]["step"] == 1


@pytest.mark.skipif(not HAS_GYMNASIUM, reason="gymnasium (the rl extra) is not installed")
def test_gymnasium_check_env(tasks) -> None:
    from gymnasium.utils.env_checker import check_env

    env = SlotEnv(tasks["softmax"], cost, batch_size=4, max_steps=4)
    # action_space.sample() draws any index per slot, so some candidates break a constraint
    # (reward 0, info["invalid"]): the batch action goes through check_env as it is.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    messages = [str(w.message) for w in caught]
    # the one thing gymnasium's checker objects to is the design itself: one reward per candidate
    assert messages and all("reward returned by `step()` must be a float" in m for m in messages), messages
    assert env.action_space.shape == (4, 5)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    obs, _, _, _, _ = env.step(env.action_space.sample())
    assert env.observation_space.contains(obs)


@pytest.mark.slow
def test_default_evaluator_runs_the_policys_candidate_turn(tasks, tmp_path) -> None:
    """The default path: TemplatePolicy's files and turn (write_file, compile, profile) through our
    tools in a KernelSession; the compile is real (sm_90), the verdict scripted."""
    from agent.rl.fakes import FakeVerdictReferee

    referee = FakeVerdictReferee(verdict="correct")
    evaluator = PolicyEvaluator(referee=referee, root=tmp_path)
    env = SlotEnv(tasks["relu"], evaluator, batch_size=2)
    env.reset()
    try:
        _, rewards, _, _, info = env.step([relu(512), relu(512, vec=3)])
        first = info["candidates"][0]
        assert first["ok"] is True and first["ms"] == pytest.approx(1.0), first
        assert rewards == [1.0, 0.0] and referee.calls == 1
        session = evaluator._runs["19_ReLU"].session
        assert session is not None and (session.workspace.root / "kernels" / "s0_ewise.cu").is_file()
    finally:
        env.close()
