"""`agent export-tasks --format harbor`: each task a Harbor task folder that Harbor's own task
loader (harbor 0.25, Python 3.12+: run in the interpreter KERNEL_AGENT_HARBOR_PYTHON names, or
this one when it has harbor) accepts, and a reward.py that writes Harbor's reward.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli.app import app

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "benchmarks" / "tasks" / "level1"
RELU = TASKS / "19_ReLU.py"


def harbor_python() -> str | None:
    named = os.environ.get("KERNEL_AGENT_HARBOR_PYTHON")
    if named:
        return named
    try:
        import harbor  # noqa: F401
    except ImportError:
        return None
    return sys.executable


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("harbor")
    result = CliRunner().invoke(app, ["export-tasks", str(TASKS), "--format", "harbor", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_every_task_is_a_harbor_task_folder(exported: Path) -> None:
    folders = sorted(p.name for p in exported.iterdir())
    assert len(folders) == len(list(TASKS.glob("*.py"))) and "level1-19_relu" in folders
    relu = exported / "level1-19_relu"
    config = tomllib.loads((relu / "task.toml").read_text())
    assert config["task"]["name"] == "kernel-agent/level1-19_relu"
    assert config["environment"]["gpus"] == 1 and config["metadata"]["problem_id"] == 19
    assert "ModelNew" in (relu / "instruction.md").read_text()
    dockerfile = (relu / "environment" / "Dockerfile").read_text()
    assert dockerfile.startswith((REPO / "sandbox" / "Dockerfile").read_text().splitlines()[0])
    assert (
        "COPY kernel-agent/" in dockerfile
        and (relu / "environment/kernel-agent/agent/rl/reward.py").is_file()
    )
    assert (relu / "environment" / "task.py").read_text() == RELU.read_text()
    test_sh = relu / "tests" / "test.sh"
    assert os.access(test_sh, os.X_OK) and "agent eval /task/task.py /workspace" in test_sh.read_text()


def test_harbors_own_loader_accepts_them(exported: Path, tmp_path: Path) -> None:
    python = harbor_python()
    if python is None:
        pytest.skip(
            "harbor is not installed (Python 3.12+; set KERNEL_AGENT_HARBOR_PYTHON to its interpreter)"
        )
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from harbor.models.task.task import Task\n"
        "out = []\n"
        "for d in sorted(Path(sys.argv[1]).iterdir()):\n"
        "    assert Task.is_valid_dir(d), d\n"
        "    t = Task(d)\n"
        "    test = t.paths.discovered_test_path_for(t.config.environment.os)\n"
        "    out.append({'name': t.name, 'gpus': t.config.environment.gpus, 'test': str(test),\n"
        "                'instruction': len(t.instruction), 'dockerfile': (t.paths.environment_dir / 'Dockerfile').is_file()})\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [python, "-c", code, str(exported)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tasks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(tasks) == len(list(TASKS.glob("*.py")))
    relu = next(t for t in tasks if t["name"] == "kernel-agent/level1-19_relu")
    assert relu["gpus"] == 1 and relu["test"].endswith("tests/test.sh") and relu["dockerfile"]
    assert relu["instruction"] > 1000


@pytest.mark.slow
def test_reward_py_writes_harbors_reward_json(exported: Path, tmp_path: Path) -> None:
    from tests.rl.test_reward import result

    reward_py = exported / "level1-19_relu" / "tests" / "reward.py"
    verdict = tmp_path / "result.json"
    verdict.write_text(result(eager=1.6, compiled=1.2).model_dump_json())
    dest = tmp_path / "reward.json"
    proc = subprocess.run(
        [sys.executable, str(reward_py), str(verdict), str(dest)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(dest.read_text()) == {
        "reward": 1.0,
        "tier": 3,
        "correct": 1,
        "speedup_vs_eager": 1.6,
        "speedup_vs_compile": 1.2,
    }
    verdict.write_text("the referee crashed")
    subprocess.run([sys.executable, str(reward_py), str(verdict), str(dest)], check=True, capture_output=True)
    assert json.loads(dest.read_text()) == {"reward": 0.0, "tier": 0, "correct": 0}


def test_refuses_an_unknown_format(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export-tasks", str(RELU), "--format", "nope", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "harbor" in result.output
