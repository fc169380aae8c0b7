"""Full-size KernelBench outputs (6-8 GB) cross from the candidate to the judge in parts: the
judge joins exactly what was saved, and refuses part lists it did not expect."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)

# isort: split
import candidate_trials
import judge


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidate_trials, "PART_BYTES", 64)  # 16 floats per part


def saved(tmp_path: Path, *outputs: object) -> Path:
    path = tmp_path / "trial_0.pt"
    snapshots = [o.clone() if isinstance(o, torch.Tensor) else None for o in outputs]
    no_gpu = candidate_trials.HandoffSender(None, "cpu")
    candidate_trials.save_outputs(str(path), "tuple", list(outputs), snapshots, no_gpu)
    return path


def test_a_large_output_is_saved_in_parts_and_joined_bit_for_bit(tmp_path: Path, small_parts: None) -> None:
    big = torch.randn(5, 7)  # 140 bytes: 3 parts
    small = torch.arange(3, dtype=torch.int64)  # 24 bytes: inline
    path = saved(tmp_path, big, small, 2.5)
    items = torch.load(path, weights_only=True)["items"]
    assert items[0] == {"parts": 3, "shape": [5, 7]}
    assert torch.equal(items[1], small) and items[2] == 2.5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "trial_0.pt",
        *(f"trial_0.pt.0.{k}" for k in range(3)),
    ]
    joined = judge._joined_parts(str(path), 0, items[0], torch.device("cpu"))
    assert isinstance(joined, torch.Tensor) and torch.equal(joined, big)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"parts": 4, "shape": [5, 7]}, "part 3 of the candidate's output is unreadable"),
        ({"parts": 3, "shape": [5, 8]}, "has 35 elements where its shape [5, 8] needs 40"),
        ({"parts": "../../x", "shape": [5, 7]}, "malformed"),
        ({"parts": 3, "shape": [5, -7]}, "malformed"),
    ],
)
def test_a_part_list_that_does_not_add_up_fails_the_output(
    tmp_path: Path, small_parts: None, entry: dict, problem: str
) -> None:
    path = saved(tmp_path, torch.randn(5, 7))
    result = judge._joined_parts(str(path), 0, entry, torch.device("cpu"))
    assert isinstance(result, str) and problem in result


def test_outputs_that_do_not_fit_on_the_disk_are_the_referees_limit_said_with_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from agent.referee.processes import CandidateRun, candidate_failure
    from sandbox.base import ExecResult

    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(100, 100, 10))
    with pytest.raises(candidate_trials.StageFailure) as caught:
        saved(tmp_path, torch.randn(4, 4))
    assert (
        caught.value.kind == "referee_capacity" and "do not fit in the 0.00 GB free" in caught.value.message
    )
    failure = {"stage": caught.value.stage, "kind": caught.value.kind, "message": caught.value.message}
    run = CandidateRun(result=ExecResult(returncode=1), record={"failure": failure})  # type: ignore[typeddict-item]
    verdict, report = candidate_failure(run, timeout=60)
    assert verdict == "referee_error" and "free space there" in report.message
