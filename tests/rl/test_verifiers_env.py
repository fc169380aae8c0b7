"""The verifiers environment, loaded through verifiers' own loader and classes (no mock of its
API): a scripted multi-turn rollout on 19_ReLU through the toolset's MCP server, a real compile,
and the reward from a fake referee verdict. Also the failed-sample paths of the session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers.v1", reason="the rl extra: pip install -e '.[rl]'")

from agent.rl.fakes import FakeVerdictReferee  # noqa: E402
from agent.rl.session import KernelSession, RolloutConfig  # noqa: E402
from agent.rl.verifiers_env import (  # noqa: E402
    TASKSET_ID,
    KernelState,
    KernelTask,
    KernelToolset,
    load_environment,
)
from agent.tasks import parse_task  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_EXAMPLE = REPO / "skills" / "cuda-extension" / "examples" / "relu"
TOOLS = {
    "list_files", "read_file", "write_file", "edit_file", "compile", "verify", "profile", "submit",
    "list_skills", "read_skill",
}  # fmt: skip
FAKE = "agent.rl.fakes:fake_referee"


def relu_env(**referee_args: object) -> vf.Env:
    return load_environment(
        [RELU_TASK], policy="strict", budget="wall=10m,gpu=5m", referee=FAKE, referee_args=referee_args
    )


def test_load_environment_is_verifiers_env_over_our_tasks() -> None:
    env = relu_env()
    assert isinstance(env, vf.Env) and isinstance(env, vf.SingleAgentEnv)
    assert env.config.taskset.id == TASKSET_ID
    # the config round-trips through verifiers' own loader (what its eval/serve entrypoints do)
    again = vf.load_environment(vf.SingleAgentEnvConfig.model_validate(env.config.model_dump()))
    assert isinstance(again, vf.SingleAgentEnv)
    (task,) = list(env.taskset)
    assert isinstance(task, KernelTask) and task.data.name == "19_ReLU"
    assert "ModelNew" in task.data.prompt_text and task.data.system_prompt
    assert "float32[" in task.data.prompt_text  # instantiated: the prompt states the input shapes
    (toolset,) = type(task).toolsets(task.config)
    assert isinstance(toolset, KernelToolset)
    assert toolset.config.rollout.referee.policy == "strict"
    assert toolset.config.rollout.budget.wall == 600 and toolset.config.rollout.budget.gpu == 300


def _mcp(toolset: KernelToolset):
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("kernel")
    toolset.register(server)
    return server


def _text(result) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def test_tools_are_ours_by_name_with_their_arguments() -> None:
    (task,) = list(relu_env().taskset)
    (toolset,) = type(task).toolsets(task.config)
    tools = asyncio.run(_mcp(toolset).list_tools())
    assert {t.name for t in tools} == TOOLS
    write = next(t for t in tools if t.name == "write_file")
    assert set(write.input_schema["properties"]) == {"path", "content"}


def _score(task: KernelTask, state: KernelState):
    trace = vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
    )
    trace.state = state
    asyncio.run(task.score(trace))
    return trace


@pytest.mark.slow
def test_scripted_rollout_compiles_for_real_and_scores_the_fake_verdict() -> None:
    env = relu_env(verdict="correct", speedup_eager=1.6, speedup_compile=1.3, noise=0.02)
    (task,) = list(env.taskset)
    (toolset,) = type(task).toolsets(task.config)
    server = _mcp(toolset)

    async def rollout() -> list[str]:
        await toolset.setup_task(task)
        files = {
            "kernels/relu.cu": (RELU_EXAMPLE / "kernels" / "relu.cu").read_text(),
            "kernels/relu_binding.cpp": (RELU_EXAMPLE / "kernels" / "relu_binding.cpp").read_text(),
            "model_new.py": (RELU_EXAMPLE / "model_new.py").read_text(),
        }
        script = [
            ("read_file", {"path": "reference.py"}),
            ("write_file", {"path": "kernels/relu.cu", "content": "this is not CUDA;\n"}),
            ("compile", {}),  # turn 3: a real compile error comes back to the model
            *[("write_file", {"path": p, "content": t}) for p, t in files.items()],
            ("compile", {}),
            ("profile", {}),
            ("submit", {"summary": "grid-stride ReLU"}),
        ]
        replies = []
        for name, arguments in script:
            replies.append(_text(await server.call_tool(name, arguments)))
        return replies

    replies = asyncio.run(rollout())
    assert "class Model" in replies[0]
    assert replies[2].startswith("ERROR:") and "relu.cu" in replies[2]
    assert "ERROR" not in replies[6], replies[6]  # the known-good workspace builds
    assert "fake: correct" in replies[7] or "VERDICT: correct" in replies[7]
    assert "submission accepted" in replies[8]
    session = toolset.session
    assert session is not None and session.status == "submitted"
    outcome = session.outcome()
    assert outcome.result is not None and outcome.result["compile"]["ok"]
    trace = _score(task, KernelState(outcome=outcome))
    assert trace.rewards["kernel_reward"].score == 1.0  # faster than both beyond the noise
    assert trace.metrics["tier"] == 3.0 and trace.metrics["failed"] == 0.0
    session.close()


def test_no_sample_scores_as_failure() -> None:
    (task,) = list(relu_env().taskset)
    trace = _score(task, KernelState())
    assert trace.rewards["kernel_reward"].score == 0.0 and trace.metrics["failed"] == 1.0


class _Crashing(FakeVerdictReferee):
    def evaluate(self, *args, **kwargs):
        raise RuntimeError("the GPU fell off")


class _Hanging(FakeVerdictReferee):
    def evaluate(self, *args, **kwargs):
        import time

        time.sleep(5)
        raise AssertionError("not reached in time")


def _session(tmp_path: Path, referee, **config) -> KernelSession:
    return KernelSession.open(
        parse_task(RELU_TASK), root=tmp_path, referee=referee, config=RolloutConfig(**config)
    )


def test_a_crash_in_a_tool_is_a_failed_sample_not_an_exception(tmp_path: Path) -> None:
    session = _session(tmp_path, _Crashing())
    text = session.call("verify", {})
    assert "the rollout failed: crash: verify raised RuntimeError: the GPU fell off" in text
    assert session.call("list_files", {}).startswith("the rollout has ended")
    outcome = session.finish()
    assert outcome.failed and outcome.status == "failed" and outcome.reward.reward == 0.0
    assert "GPU fell off" in outcome.reward.reason


def test_a_hang_is_a_failed_sample(tmp_path: Path) -> None:
    session = _session(tmp_path, _Hanging(), tool_timeout_s=0.5)
    assert "hang: verify still running after 0.5 s" in session.call("verify", {})
    assert session.finish().failed


def test_floods_are_failed_samples(tmp_path: Path) -> None:
    big = _session(tmp_path / "a", FakeVerdictReferee(), max_argument_bytes=1000)
    assert "flood" in big.call("write_file", {"path": "model_new.py", "content": "x" * 5000})
    assert big.finish().failed
    many = _session(tmp_path / "b", FakeVerdictReferee(), max_tool_calls=3)
    for _ in range(3):
        assert "flood" not in many.call("list_files", {})
    assert "flood: more than 3 tool calls" in many.call("list_files", {})
    assert many.finish().reason.startswith("flood")


def test_model_mistakes_are_tool_errors_not_failures(tmp_path: Path) -> None:
    session = _session(tmp_path, FakeVerdictReferee())
    assert session.call("write_file", {"path": "binding.cpp", "content": "x"}).startswith("ERROR:")
    assert session.call("nope", {}).startswith("ERROR: unknown tool")
    assert session.call("read_file", "{not json").startswith("ERROR:")
    assert not session.done
    outcome = session.finish()
    assert not outcome.failed and outcome.status == "stopped" and outcome.reward.tier == 0
    assert json.loads(outcome.model_dump_json())["reward"]["reason"] == "no candidate was judged"
