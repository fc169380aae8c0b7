"""A scripted `agent solve` on a real GPU with the real referee: what the model sees.

The script writes the ReLU example, compiles (the resource table), profiles (speed-of-light
lines), asks `ncu`, plants an out-of-bounds write and asks `sanitize`, takes the plant out, and
submits. The run's transcript, report and a summary of which facts the model was shown land in
OUT_DIR.

usage: python benchmarks/scripted_session_gpu.py OUT_DIR [--isolation auto|bwrap|none]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
from pathlib import Path

from agent.budget import BudgetLimits
from agent.messages import AssistantMessage, ToolCall
from agent.models.scripted import ScriptedModel
from agent.referee import EvalOptions
from agent.run.solve import SolveConfig, solve
from agent.tasks import load_task
from agent.transcripts.format import ToolResultEvent
from agent.transcripts.reader import load_transcript

REPO = Path(__file__).resolve().parents[1]
TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
EXAMPLE = REPO / "skills" / "cuda-extension" / "examples" / "relu"
CLEAN_STORE = "    y[i] = v;\n"
PLANTED_STORE = (
    "    y[i] = v;\n    if (i == n4 - 1) y[i + (1LL << 30)] = v;  // planted: 16 GiB past the end\n"
)
# What the model must have been shown, by the tool that shows it.
FACTS = {
    "resource table (compile)": ("compile", "registers"),
    "speed of light (profile)": ("profile", "of the memory floor"),
    "ncu metrics": ("ncu", "DRAM"),
    "sanitizer finding on the planted write": ("sanitize", "relu_kernel"),
}


def _call(tag: str, name: str, **arguments: object) -> AssistantMessage:
    raw = json.dumps(arguments)
    return AssistantMessage(tool_calls=[ToolCall.from_raw(id=tag, name=name, raw_arguments=raw)])


def steps() -> list[AssistantMessage]:
    files = {
        p.relative_to(EXAMPLE).as_posix(): p.read_text() for p in sorted(EXAMPLE.rglob("*")) if p.is_file()
    }
    writes = [
        _call(f"write{i}", "write_file", path=path, content=text)
        for i, (path, text) in enumerate(files.items())
    ]
    return [
        *writes,
        _call("compile1", "compile"),
        _call("profile1", "profile"),
        _call("ncu1", "ncu", launches=4),
        _call("plant", "edit_file", path="kernels/relu.cu", old_string=CLEAN_STORE, new_string=PLANTED_STORE),
        _call("compile2", "compile"),
        _call("sanitize1", "sanitize", check="memcheck"),
        _call(
            "unplant", "edit_file", path="kernels/relu.cu", old_string=PLANTED_STORE, new_string=CLEAN_STORE
        ),
        _call("compile3", "compile"),
        _call("submit", "submit", summary="float4 ReLU, one pass over memory"),
    ]


def _gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "none"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--isolation", default="auto")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: check the script's mechanics")
    args = parser.parse_args()
    out = args.out / "run"
    model = ScriptedModel(steps(), name="scripted")
    result = solve(
        SolveConfig(
            task=TASK,
            out=out,
            model="scripted",
            budget=BudgetLimits(turns=None, usd=None, wall=None, gpu=None),
            referee=EvalOptions(),
            shell=False,
            allow_no_gpu=args.dry_run,
        ),
        model=model,
        task=load_task(TASK),
        sandbox_options={"isolation": args.isolation},
    )
    shown: dict[str, str] = {}
    for event in load_transcript(out / "transcript.jsonl").of_type(ToolResultEvent):
        shown[event.tool_name] = shown.get(event.tool_name, "") + event.content + "\n"
    facts = {fact: marker in shown.get(tool, "") for fact, (tool, marker) in FACTS.items()}
    summary = {
        "command": f"python benchmarks/scripted_session_gpu.py OUT_DIR --isolation {args.isolation}",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "gpu": _gpu_name(),
            "host": platform.node(),
        },
        "status": result.status,
        "message": result.message,
        "facts_shown": facts,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
