"""The compile tool's resource table, `ncu` and `sanitize` on a real GPU: the ReLU example as it is,
then with a planted out-of-bounds write (one thread writes 16 GiB past the output).

usage: python benchmarks/gpu_tools_check.py OUT_DIR [--isolation bwrap|none]

Writes OUT_DIR/gpu_tools_check.json: each tool call's reply, whether it was an error, its seconds,
and the machine. Needs a GPU, Nsight Compute and compute-sanitizer.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.budget import Budget, BudgetLimits
from agent.messages import ToolCall
from agent.referee import EvalOptions
from agent.tasks import parse_task
from agent.tools import Toolbox, ToolContext, ToolSettings
from agent.tools.candidates import CandidateBook
from agent.tools.ncu import ncu
from agent.tools.pipeline import compile_workspace
from agent.tools.sanitize import sanitize
from agent.workspace import Workspace
from sandbox.base import open_sandbox

REPO = Path(__file__).resolve().parents[1]
TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
EXAMPLE = REPO / "skills" / "cuda-extension" / "examples" / "relu"
CLEAN_STORE = "    y[i] = v;\n"
PLANTED_STORE = (
    "    y[i] = v;\n    if (i == n4 - 1) y[i + (1LL << 30)] = v;  // planted: 16 GiB past the end\n"
)


class Events(list):
    def write(self, event: Any) -> Any:
        self.append(event)
        return event


def call(toolbox: Toolbox, ctx: ToolContext, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    output = toolbox.call(ctx, ToolCall.from_raw(id=name, name=name, raw_arguments=json.dumps(arguments)))
    seconds = time.monotonic() - started
    print(f"--- {name} {arguments} ({seconds:.1f}s, error={output.is_error})\n{output.content}\n", flush=True)
    return {
        "tool": name,
        "arguments": arguments,
        "error": output.is_error,
        "seconds": seconds,
        "reply": output.content,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--isolation", default="auto")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gpu-tools-"))
    ws = Workspace.create(root / "ws", parse_task(TASK))
    shutil.copytree(EXAMPLE / "kernels", ws.root / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLE / "model_new.py", ws.root / "model_new.py")
    budget = Budget(BudgetLimits(turns=None, usd=None, wall=None, gpu=None))
    ctx = ToolContext(
        task=parse_task(TASK),
        workspace=ws,
        sandbox=open_sandbox("local", workspace=ws.root, cache_dir=root / "cache", isolation=args.isolation),
        referee=None,  # type: ignore[arg-type]  # compile, ncu and sanitize never ask the referee
        budget=budget,
        candidates=CandidateBook(),
        events=Events(),
        settings=ToolSettings(referee=EvalOptions()),
    )
    toolbox = Toolbox([compile_workspace, ncu, sanitize])
    calls = [
        call(toolbox, ctx, "compile", {}),
        call(toolbox, ctx, "ncu", {"launches": 4}),
        call(toolbox, ctx, "sanitize", {"check": "memcheck"}),
    ]
    source = ws.root / "kernels" / "relu.cu"
    source.write_text(source.read_text().replace(CLEAN_STORE, PLANTED_STORE, 1))
    calls += [call(toolbox, ctx, "compile", {}), call(toolbox, ctx, "sanitize", {"check": "memcheck"})]
    gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    record = {
        "command": "python benchmarks/gpu_tools_check.py OUT_DIR",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"gpu": gpu, "host": platform.node(), "isolation": args.isolation},
        "gpu_seconds_charged": budget.usage().gpu,
        "calls": calls,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_tools_check.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
