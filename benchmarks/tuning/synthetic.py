"""SYNTHETIC cache files, from an analytic model, to develop and test the replay code without a GPU.

NOT measurements: never report numbers computed from these files. Each file is marked
`"synthetic": true` and replay.py refuses to write a results table from it unless told
--allow-synthetic (which also stamps every table as synthetic).

usage: python benchmarks/tuning/synthetic.py --out-dir DIR [--seed N]

The model, per kernel: every parameter has a preferred position in its list and a weight; the
time grows with the distance from the preference, two random pairs of parameters interact, a
few points fall off a cliff (2-6x slower, as register spills do) and a few fail; multiplicative
log-normal noise on top. The second shape of a kernel moves one or two preferences by a step,
so warm starts have something to transfer.
"""

from __future__ import annotations

import argparse
import ast
import math
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from agent.tune.cache import write_cache  # noqa: E402
from agent.tune.results import Measurement  # noqa: E402
from agent.tune.space import Space, load_space_file, shape_names  # noqa: E402


def static_shapes(task_file: Path) -> list[dict]:
    """Input shapes of a benchmark task, read from its constants without running it."""
    source = task_file.read_text()
    consts = {
        node.targets[0].id: node.value.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    }
    return [
        {"shape": [consts[d.strip()] for d in m.split(",")]}
        for m in re.findall(r"torch\.randn\(([^)]*)\)", source)
    ]


def model_times(
    space: Space, rng: random.Random, prefs: list[float], weights: list[float]
) -> dict[str, float | None]:
    dims = len(space.names)
    pairs = [tuple(rng.sample(range(dims), 2)) for _ in range(2)] if dims > 1 else []
    pair_w = [rng.uniform(0.2, 0.8) for _ in pairs]
    times: dict[str, float | None] = {}
    for point in space.points:
        x = space.coords(point)
        cost = sum(w * abs(xi - p) ** 1.5 for xi, p, w in zip(x, prefs, weights, strict=True))
        for (a, b), w in zip(pairs, pair_w, strict=True):
            cost += w * abs((x[a] - prefs[a]) - (x[b] - prefs[b]))
        t = 0.05 * math.exp(cost) * rng.lognormvariate(0.0, 0.03)
        roll = rng.random()
        if roll < 0.03:
            t *= rng.uniform(2.0, 6.0)
        times[space.key(point)] = None if roll > 0.98 else t
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for kernel_dir in sorted((HERE / "kernels").iterdir()):
        kernel = kernel_dir.name
        rng = random.Random(f"{args.seed}:{kernel}")
        files = sorted((HERE / "tasks").glob(f"{kernel}_*.py"))
        space0 = Space(load_space_file(kernel_dir), shapes=shape_names(static_shapes(files[0])))
        prefs = [rng.random() for _ in space0.names]
        weights = [rng.uniform(0.3, 2.0) for _ in space0.names]
        for index, task_file in enumerate(files):
            space = Space(load_space_file(kernel_dir), shapes=shape_names(static_shapes(task_file)))
            shifted = list(prefs)
            if index:
                for d in rng.sample(range(len(shifted)), min(2, len(shifted))):
                    shifted[d] = min(
                        1.0, max(0.0, shifted[d] + rng.choice((-1, 1)) / max(1, len(space.values[d]) - 1))
                    )
            times = model_times(space, rng, shifted, weights)
            measurements = [
                Measurement(
                    key=space.key(p),
                    config=space.config(p),
                    status="ok" if times[space.key(p)] is not None else "failed",
                    time_ms=times[space.key(p)],
                    error="" if times[space.key(p)] is not None else "synthetic failure",
                )
                for p in space.points
            ]
            from agent.tune.apply import read_tune_literal

            tune = read_tune_literal(kernel_dir / "model_new.py") or {}
            default = space.key(space.point({n: tune[n] for n in space.names}))
            write_cache(
                args.out_dir / f"{task_file.stem}.json",
                space=space,
                measurements=measurements,
                kernel_name=task_file.stem,
                device_name="SYNTHETIC (analytic model, not a measurement)",
                meta={
                    "synthetic": True,
                    "kernel": kernel,
                    "default": default,
                    "features": {
                        "task_name": task_file.stem,
                        "ops": [f"synthetic:{kernel}"],
                        "shapes": [s["shape"] for s in static_shapes(task_file)],
                        "dtypes": ["float32"],
                        "gpu": "synthetic",
                        "kernel_hash": kernel,
                        "params": list(space.names),
                        "space_sig": space.signature(),
                    },
                },
            )
            print(f"{task_file.stem}: {len(space)} points (synthetic)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
