"""Diagnostic: judges the side_stream candidate on ReLU and prints each trial's problems (which
trial sees "changed after forward returned"; results/referee-h200/run5/ ran it on the H200)."""

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from agent.referee import EvalOptions, evaluate  # noqa: E402
from agent.referee.baselines import BaselineCache  # noqa: E402

work = Path(tempfile.mkdtemp())
sol = Path(shutil.copy(ROOT / "tests/referee/candidates/python/side_stream.py", work / "side_stream.py"))
r = evaluate(
    ROOT / "benchmarks/tasks/level1/19_ReLU.py",
    sol,
    EvalOptions(policy="kernelbench", trials=2, compile_mode=None),
    baseline_cache=BaselineCache(work / "b.json"),
)
print("verdict", r.verdict, "|", r.reason[:300])
for t in (r.correctness.trials + r.correctness.rechecks) if r.correctness else []:
    d = t.outputs[0] if t.outputs else None
    print(t.kind, t.index, t.passed, t.problems, d and (d.actual_nan, d.numel, d.max_abs_err))
print("stages", r.stage_times.candidate_stages)
