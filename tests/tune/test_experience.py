import statistics

from agent.tune.cache import ReplayEvaluator
from agent.tune.experience import ExperienceLibrary, Features, similarity
from agent.tune.limits import BudgetSpec, TuneBudget
from agent.tune.results import Measurement
from agent.tune.search import Search, SearchOptions
from agent.tune.space import Space, SpaceFile
from tests.tune.helpers import gemm_like_space, rugged_times


def features(**kw) -> Features:
    base = dict(
        task_name="softmax_a",
        ops=["aten._softmax"],
        shapes=[[4096, 2048]],
        dtypes=["float32"],
        gpu="H200",
        kernel_hash="k1",
        params=["TPR", "RPB", "VEC"],
        space_sig="s1",
    )
    return Features(**{**base, **kw})


def test_similarity_ranks_what_transfers():
    query = features()
    same = similarity(features(), query)
    other_shape = similarity(features(shapes=[[16384, 512]], space_sig="s2"), query)
    other_gpu = similarity(features(gpu="A100"), query)
    other_op = similarity(features(ops=["aten.native_layer_norm"], kernel_hash="k2"), query)
    disjoint = similarity(features(params=["TILE", "PAD"]), query)
    assert same > other_shape > other_op
    assert same > other_gpu
    assert disjoint == 0.0
    assert 0.99 <= same <= 1.0


def test_store_and_warm_start_projects_into_the_new_space(tmp_path):
    old = Space(SpaceFile(params={"BLOCK": [64, 128, 256], "VEC": [1, 2, 4], "UNROLL": [1, 2]}))
    history = [
        Measurement(key=old.key(p), config=old.config(p), status="ok", time_ms=float(i + 1))
        for i, p in enumerate(sorted(old.points, key=lambda p: (-p[0], -p[1])))
    ]
    history.append(Measurement(key="x", config={"BLOCK": 64, "VEC": 1, "UNROLL": 1}, status="incorrect"))
    path = tmp_path / "exp.sqlite"
    with ExperienceLibrary(path) as lib:
        run_id = lib.record(
            features(params=["BLOCK", "VEC", "UNROLL"]),
            old,
            history,
            default_key=None,
            default_ms=None,
            best_key=history[0].key,
            best_ms=1.0,
        )
        assert run_id == 1
    # A new space: BLOCK has other values, UNROLL is gone, WAVES is new; VEC=4 is now invalid with BLOCK=512.
    new = Space(
        SpaceFile(
            params={"BLOCK": [128, 512, 1024], "VEC": [1, 2, 4], "WAVES": [1, 4]},
            constraints=["BLOCK * VEC <= 2048"],
        )
    )
    default = new.point({"BLOCK": 128, "VEC": 1, "WAVES": 4})
    with ExperienceLibrary(path) as lib:
        points, sources = lib.warm_start(
            features(params=["BLOCK", "VEC", "WAVES"], space_sig="s9"), new, default
        )
        assert len(lib.runs()) == 1 and lib.runs()[0].points[0][1] == 1.0
    assert points and all(new.is_valid(p) for p in points) and default not in points
    best_old = history[0].config  # BLOCK=256, VEC=4 -> nearest BLOCK is 128 or 512; WAVES from the default
    first = new.config(points[0])
    assert first["WAVES"] == 4 and first["VEC"] in (2, 4) and first["BLOCK"] in (128, 512)
    assert best_old["VEC"] == 4
    assert sources[0].run_id == 1 and sources[0].points[0] == new.key(points[0])


def test_no_warm_start_from_unrelated_runs(tmp_path):
    space = Space(SpaceFile(params={"TILE": [16, 32], "PAD": [0, 1]}))
    with ExperienceLibrary(tmp_path / "e.sqlite") as lib:
        lib.record(
            features(),
            space,
            [Measurement(key="16,0", config={"TILE": 16, "PAD": 0}, status="ok", time_ms=1.0)],
            default_key=None,
            default_ms=None,
            best_key="16,0",
            best_ms=1.0,
        )
        points, sources = lib.warm_start(
            features(params=["BLOCK"]), Space(SpaceFile(params={"BLOCK": [1, 2]})), (1,)
        )
    assert points == [] and sources == []


def test_warm_start_from_a_similar_problem_helps(tmp_path):
    space = gemm_like_space()
    source_times = rugged_times(space, 41, fail_rate=0.0)
    # The target: the same landscape seen through another shape: 10% noise on every point.
    import random

    rng = random.Random(2)
    target_times = {k: v * rng.lognormvariate(0, 0.1) for k, v in source_times.items()}
    feats = features(params=list(space.names))
    with ExperienceLibrary(tmp_path / "e.sqlite") as lib:
        ev = ReplayEvaluator(space, source_times)
        outcome = Search(space, TuneBudget(BudgetSpec(max_evals=50)), ev, SearchOptions(seed=0)).run()
        lib.record(
            feats,
            space,
            outcome.history,
            default_key=outcome.default_key,
            default_ms=outcome.default_ms,
            best_key=outcome.best_key,
            best_ms=outcome.best_ms,
        )
        warm, _ = lib.warm_start(feats.model_copy(update={"shapes": [[1024, 512]]}), space, space.points[0])
    assert warm
    optimum = min(target_times.values())

    def quality(warm_points):
        found = []
        for seed in range(4):
            ev = ReplayEvaluator(space, target_times)
            out = Search(
                space, TuneBudget(BudgetSpec(max_evals=10)), ev, SearchOptions(seed=seed), warm=warm_points
            ).run()
            found.append(optimum / target_times[out.best_key])
        return statistics.fmean(found)

    assert quality(warm) > quality([]) + 0.02


def test_only_points_that_beat_their_runs_start_transfer(tmp_path):
    space = Space(SpaceFile(params={"A": [1, 2, 3, 4]}))
    history = [
        Measurement(key=str(a), config={"A": a}, status="ok", time_ms=t)
        for a, t in ((1, 2.0), (2, 1.0), (3, 3.0))
    ]
    with ExperienceLibrary(tmp_path / "e.sqlite") as lib:
        lib.record(
            features(params=["A"]), space, history, default_key="1", default_ms=2.0, best_key="2", best_ms=1.0
        )
        points, _ = lib.warm_start(features(params=["A"]), space, (4,))
    assert points == [(2,)]
