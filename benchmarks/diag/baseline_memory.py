"""Where a judge's GPU memory goes while it times a task's baselines.

In the tenth session's full-size batch on the H200 (`results/h200-2026-12-03e/`), the judge of
level-1 problem 96 (HuberLoss: two 4 GiB inputs) held 112 GiB of live tensors during its eager
timing and ran out, taking level-1 problem 97's judge down with it. The same code on the CPU keeps
one input set alive at a time. This runs the judge's own `_baselines` on one task, in this
process, with the task's inputs counted as they are made, and prints the allocator's numbers
after every call of `get_inputs`:

    python benchmarks/diag/baseline_memory.py .kb/level1/96_HuberLoss.py [--device cuda] [--no-compile]
"""

from __future__ import annotations

import argparse
import sys
import time
import weakref
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sandbox" / "workers"))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
import judge
from referee_common import build_reference, load_task_module, seeded_call


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("task", type=Path)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-compile", action="store_true", help="time eager alone")
    parser.add_argument("--max-lines", type=int, default=60)
    args = parser.parse_args()

    namespace = load_task_module(args.task.read_text(), str(args.task))
    made: list[weakref.ref] = []
    lines: list[str] = []
    started = time.monotonic()

    def get_inputs() -> list:
        values = list(namespace["get_inputs"]())
        made.extend(weakref.ref(v) for v in values if isinstance(v, torch.Tensor))
        alive = sum(1 for ref in made if ref() is not None)
        allocated = torch.cuda.memory_allocated() / 2**30 if args.device.startswith("cuda") else 0.0
        if len(lines) < args.max_lines:
            lines.append(
                f"{time.monotonic() - started:7.2f}s call {len(made):4d} tensors: alive {alive:3d} allocated {allocated:7.2f} GiB"
            )
        return values

    init_args = seeded_call(namespace["get_init_inputs"], 1, args.device)
    model = build_reference(namespace, init_args, 2, args.device)
    spec = {
        "device": args.device,
        "baselines": {"eager": True, "compile_mode": None if args.no_compile else "default"},
        "timing": None,
    }
    stages: dict[str, float] = {}
    try:
        out, _ = judge._baselines(model, get_inputs, spec, None, stages, timed=True, measure_bandwidth=False)
    finally:
        print("\n".join(lines))
    for name, measured in out.items():
        print(name, measured.get("error") or f"{measured['median_ms']:.4f} ms over {measured['n']} calls")
    print({k: round(v, 2) for k, v in stages.items()})
    if args.device.startswith("cuda"):
        print(f"peak allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
