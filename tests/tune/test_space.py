import itertools
import json

import pytest

from agent.tune.space import DeviceLimits, Space, SpaceError, SpaceFile, parse_space_text, shape_names
from tests.tune.helpers import gemm_like_space


def brute_valid(file: SpaceFile, env: dict) -> list[tuple]:
    """The valid points by plain itertools.product and Python arithmetic, for comparison."""
    out = []
    for values in itertools.product(*file.params.values()):
        c = dict(zip(file.params, values, strict=True))
        threads = (c["BM"] // c["TM"]) * (c["BN"] // c["TN"])
        smem = (c["BM"] * c["BK"] + c["BK"] * c["BN"]) * 4
        if (
            threads >= 32
            and (c["BM"] * c["BK"]) % threads == 0
            and (c["BK"] * c["BN"]) % threads == 0
            and threads <= env["max_threads"]
            and smem <= env["max_shared"]
        ):
            out.append(values)
    return out


def test_enumeration_matches_plain_python_and_counts_rejections():
    space = gemm_like_space()
    assert space.points == brute_valid(space.file, space.env)
    assert len(space) == 210 and space.total == 243
    assert sum(space.rejected.values()) == space.total - len(space)
    assert "rejected" in space.rejection_summary()


def test_device_limits_and_shapes_enter_constraints():
    file = SpaceFile(
        params={"BLOCK": [128, 256, 512, 1024, 2048], "VEC": [1, 2, 4, 8]},
        constraints=["in0_1 % VEC == 0"],
        threads="BLOCK",
        shared_memory="BLOCK * VEC * 4 * 8",
    )
    shapes = shape_names([{"shape": [64, 12]}])
    assert shapes == {"in0_0": 64, "in0_1": 12, "in0_numel": 768}
    space = Space(file, limits=DeviceLimits(max_threads=1024, max_shared=48 * 1024), shapes=shapes)
    for point in space.points:
        c = space.config(point)
        assert c["BLOCK"] <= 1024 and 12 % c["VEC"] == 0 and c["BLOCK"] * c["VEC"] * 32 <= 48 * 1024
    assert space.check({"BLOCK": 2048, "VEC": 1}) is not None
    assert space.check({"BLOCK": 256, "VEC": 8}) is not None  # 12 % 8 != 0
    assert space.check({"BLOCK": 256, "VEC": 3}) == "VEC=3 is not one of [1, 2, 4, 8]"
    assert space.check({"BLOCK": 256, "VEC": 4}) is None
    small = Space(file, limits=DeviceLimits(max_threads=256), shapes=shapes)
    assert max(small.config(p)["BLOCK"] for p in small.points) == 256


def test_neighbours_nearest_and_keys():
    space = gemm_like_space()
    point = space.point({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4})
    assert space.key(point) == "64,64,16,4,4"
    for n in space.neighbours(point):
        assert space.is_valid(n)
        assert sum(a != b for a, b in zip(n, point, strict=True)) == 1
    assert space.nearest({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}) == point
    # A foreign value snaps to the closest one, an invalid combination to a valid neighbour.
    assert space.nearest({"BM": 60, "BN": 64, "BK": 16, "TM": 4, "TN": 4}) == point
    snapped = space.nearest({"BM": 32, "BN": 32, "BK": 8, "TM": 8, "TN": 8})
    assert space.is_valid(snapped)


def test_signature_ignores_default_but_not_constraints():
    a = gemm_like_space()
    b = Space(a.file.model_copy(update={"default": {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}}))
    c = Space(a.file.model_copy(update={"constraints": a.file.constraints[:1]}))
    assert a.signature() == b.signature() != c.signature()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"params": {}}, "at least one parameter"),
        ({"params": {"bad-name": [1]}}, "not an identifier"),
        ({"params": {"A": [1, 1]}}, "values repeat"),
        ({"params": {"A": [1]}, "extra": 1}, "Extra inputs"),
        ({"params": {"A": [1, 2]}, "constraints": ["A.real > 0"]}, "Attribute"),
        ({"params": {"A": [1, 2]}, "constraints": ["B > 0"]}, "unknown name"),
        ({"params": {"A": [1, 2]}, "constraints": ["A > 5"]}, "no point"),
        ({"params": {"max_threads": [1, 2]}}, "clash"),
    ],
)
def test_bad_space_files_say_what_to_fix(body, message):
    with pytest.raises(SpaceError, match=message):
        Space(parse_space_text(json.dumps(body)))


def test_not_json():
    with pytest.raises(SpaceError, match="not valid JSON"):
        parse_space_text("{params: }")


def test_huge_space_refused():
    with pytest.raises(SpaceError, match="under"):
        Space(SpaceFile(params={f"P{i}": list(range(10)) for i in range(6)}))
