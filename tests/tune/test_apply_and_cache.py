import math
import random

import pytest

from agent.tune.apply import read_tune_header, read_tune_literal, write_tune_header, write_tune_literal
from agent.tune.cache import FAILED, ReplayEvaluator, load_cache, write_cache
from agent.tune.results import Measurement
from agent.tune.scoring import expected_random_best, expected_random_fraction, methodology_score
from agent.tune.space import Space, SpaceFile

MODEL = """import torch

# tuned values: read on every call
TUNE = {
    "BLOCK": 256,  # threads
    "VEC": 4,
    "NOTE": 7,
}


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x * TUNE["VEC"]
"""


def test_tune_literal_round_trip_keeps_the_rest_of_the_file(tmp_path):
    path = tmp_path / "model_new.py"
    path.write_text(MODEL)
    assert read_tune_literal(path) == {"BLOCK": 256, "VEC": 4, "NOTE": 7}
    write_tune_literal(path, {"BLOCK": 128, "VEC": 2})
    text = path.read_text()
    assert read_tune_literal(path) == {"BLOCK": 128, "VEC": 2, "NOTE": 7}
    assert text.startswith("import torch\n\n# tuned values") and "def forward" in text
    compile(text, "model_new.py", "exec")


def test_missing_tune_literal(tmp_path):
    path = tmp_path / "model_new.py"
    path.write_text("TUNE = dict(BLOCK=1)\n")
    assert read_tune_literal(path) is None
    with pytest.raises(ValueError, match="TUNE"):
        write_tune_literal(path, {"BLOCK": 2})


def test_header_round_trip(tmp_path):
    write_tune_header(tmp_path, {"TILE": 32, "PAD": 1}, note="variant")
    text = (tmp_path / "kernels" / "tune_config.h").read_text()
    assert "#ifndef TILE\n#define TILE 32\n#endif" in text
    assert read_tune_header(tmp_path) == {"TILE": 32, "PAD": 1}


def test_cache_file_round_trip_in_kernel_tuner_format(tmp_path):
    space = Space(SpaceFile(params={"A": [1, 2], "B": [4, 8]}), shapes={"in0_0": 3})
    ms = [
        Measurement(
            key=space.key(p),
            config=space.config(p),
            status="ok" if p != (2, 8) else "incorrect",
            time_ms=float(sum(p)) if p != (2, 8) else None,
        )
        for p in space.points
    ]
    path = tmp_path / "c.json"
    write_cache(
        path, space=space, measurements=ms, kernel_name="k", device_name="dev", meta={"default": "1,4"}
    )
    cache = load_cache(path)
    assert cache.tune_params_keys == ["A", "B"] and cache.cache["2,8"]["time"] == FAILED
    assert cache.times()["1,4"] == 5.0 and cache.times()["2,8"] is None
    assert cache.space().points == space.points and cache.kernel_agent["default"] == "1,4"
    replay = ReplayEvaluator(cache.space(), cache.times())
    assert [m.status for m in replay.measure([(1, 4), (2, 8)], "t")] == ["ok", "failed"]


def test_random_baseline_matches_monte_carlo():
    rng = random.Random(0)
    values = [rng.uniform(1, 10) for _ in range(40)] + [None] * 5
    for budget in (1, 5, 20, 45):
        draws = [rng.sample(values, budget) for _ in range(20000)]
        worst = max(v for v in values if v is not None)
        best = [min((v for v in d if v is not None), default=worst) for d in draws]
        optimum = min(v for v in values if v is not None)
        assert expected_random_best(values, budget) == pytest.approx(sum(best) / len(best), rel=0.02)
        assert expected_random_fraction(values, budget) == pytest.approx(
            sum(optimum / b for b in best) / len(best), rel=0.02
        )
    assert expected_random_best(values, 45) == pytest.approx(min(v for v in values if v is not None))


def test_methodology_score_endpoints():
    assert methodology_score(1.0, 2.0, 1.0) == 1.0
    assert methodology_score(2.0, 2.0, 1.0) == 0.0
    assert methodology_score(3.0, 2.0, 1.0) == -1.0
    assert math.isclose(methodology_score(1.5, 2.0, 1.0), 0.5)
