"""Replaying recorded runs through the loop against the local sandbox, with a fake referee."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agent.run.replay
from agent.run.replay import rejudge_final, replay_run
from tests.run.conftest import run_solve
from tests.run.fakes import FakeReferee
from tests.run.session import pipeline_steps
from tests.run.test_session import RELU_PLAN

pytestmark = pytest.mark.slow


@dataclass
class SlowerReferee(FakeReferee):
    """Judges every timed candidate as `factor` times the speedup the files claim."""

    factor: float = 1.0

    def evaluate(self, task, workspace, *, sandbox, profile):
        result = super().evaluate(task, workspace, sandbox=sandbox, profile=profile)
        perf = result.performance
        if perf is not None and perf.speedup_vs_eager is not None:
            measured = perf.speedup_vs_eager
            value = measured.value * self.factor
            perf.speedup_vs_eager = measured.model_copy(
                update={"value": value, "low": value * 0.98, "high": value * 1.02}
            )
        return result


def test_a_replay_on_the_same_setup_matches_every_step(recorded: Path, tmp_path: Path) -> None:
    report = replay_run(
        recorded / "transcript.jsonl", out=tmp_path / "replay", referee=FakeReferee(), arch="sm_90"
    )
    assert report.replay_status == "submitted"
    assert len(report.steps) == 11 and {s.status for s in report.steps} == {"match"}
    assert not report.diverged and report.summary().startswith("no divergence")


def test_noise_sized_speed_changes_are_not_divergences(recorded: Path, tmp_path: Path) -> None:
    report = replay_run(
        recorded / "transcript.jsonl",
        out=tmp_path / "replay",
        referee=SlowerReferee(factor=1.01),
        arch="sm_90",
    )
    assert not report.diverged


def test_a_slower_gpu_diverges_at_the_first_profile(recorded: Path, tmp_path: Path) -> None:
    report = replay_run(
        recorded / "transcript.jsonl",
        out=tmp_path / "replay",
        referee=SlowerReferee(factor=0.7),
        arch="sm_90",
    )
    diverged = [s for s in report.steps if s.status == "diverge"]
    assert [s.call_id for s in diverged] == ["profile_1", "profile_2", "submit"]
    assert diverged[0].differences[0].kind == "speedup"
    assert report.replay_status == "submitted" and not report.stopped_early


def test_stop_at_first_divergence_ends_after_the_diverging_turn(recorded: Path, tmp_path: Path) -> None:
    report = replay_run(
        recorded / "transcript.jsonl",
        out=tmp_path / "replay",
        referee=FakeReferee(default_speedup=1.0, gpu_s=1.0),
        arch="sm_90",
        stop_at_first_divergence=True,
    )
    assert not report.diverged  # the same referee: nothing to stop for
    verdicts = tmp_path / "replay-bad"
    report = replay_run(
        recorded / "transcript.jsonl",
        out=verdicts,
        referee=SlowerReferee(factor=0.5),
        arch="sm_90",
        stop_at_first_divergence=True,
    )
    assert report.stopped_early and report.replay_status == "replay_diverged"
    assert [s.status for s in report.steps][-5:] == ["diverge", "missing", "missing", "missing", "missing"]


def test_final_only_rejudges_the_best_solution_rebuilt_from_the_edits(recorded: Path, tmp_path: Path) -> None:
    report = rejudge_final(
        recorded / "transcript.jsonl", out=tmp_path / "final", referee=FakeReferee(), arch="sm_90"
    )
    assert report.mode == "final" and not report.diverged
    assert "FAKE-SPEEDUP: 1.6" in (tmp_path / "final" / "workspace" / "model_new.py").read_text()
    slower = rejudge_final(
        recorded / "transcript.jsonl", out=tmp_path / "slow", referee=SlowerReferee(factor=0.5), arch="sm_90"
    )
    assert slower.diverged and slower.steps[0].differences[0].kind == "speedup"


def test_the_cli_reports_and_sets_the_exit_code(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer

    from agent.cli.transcripts import replay_command

    app = typer.Typer()
    app.command()(replay_command)
    referee: list[FakeReferee] = [FakeReferee()]
    monkeypatch.setattr(agent.run.replay, "default_referee", lambda config: referee[0])
    transcript = str(recorded / "transcript.jsonl")
    same = CliRunner().invoke(app, [transcript, "--arch", "sm_90", "--out", str(tmp_path / "a")])
    assert same.exit_code == 0, same.output
    assert "no divergence beyond noise" in same.output and "profile_2" in same.output
    referee[0] = SlowerReferee(factor=0.5)
    slow = CliRunner().invoke(app, [transcript, "--arch", "sm_90", "--out", str(tmp_path / "b"), "--json"])
    assert slow.exit_code == 1
    report = json.loads(slow.output)
    assert report["steps"][6]["status"] == "diverge"
    missing = CliRunner().invoke(app, [str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "cannot read" in missing.output


def test_the_run_to_run_cv_flag_sets_how_far_speedups_may_move(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer

    from agent.cli.transcripts import replay_command

    app = typer.Typer()
    app.command()(replay_command)
    referee: list[FakeReferee] = [SlowerReferee(factor=0.95)]
    monkeypatch.setattr(agent.run.replay, "default_referee", lambda config: referee[0])
    transcript = str(recorded / "transcript.jsonl")

    def replay(name: str, *options: str) -> tuple[int, dict]:
        out = tmp_path / name
        run = CliRunner().invoke(app, [transcript, "--arch", "sm_90", "--out", str(out), *options])
        assert run.exit_code in (0, 1), run.output
        return run.exit_code, json.loads((out / "replay.json").read_text())

    # 5% slower: beyond the in-run bands (2% each), within 3 sigma of the measured 3.74% spread.
    code, report = replay("default")
    assert code == 0 and report["noise"] == {"run_to_run_cv": 0.0374, "sigmas": 3.0}
    profile = next(step for step in report["steps"] if step["call_id"] == "profile_1")
    eager = next(check for check in profile["speedups"] if check["baseline"] == "eager")
    assert eager["reason"] == "run-to-run" and eager["difference"] == pytest.approx(0.06)
    assert eager["in_run_tolerance"] < eager["difference"] <= eager["tolerance"]
    code, report = replay("in-run-only", "--run-to-run-cv", "0")
    assert code == 1 and report["noise"]["run_to_run_cv"] == 0.0
    assert [s["call_id"] for s in report["steps"] if s["status"] == "diverge"] == [
        "profile_1",
        "profile_2",
        "submit",
    ]
    # 16% slower diverges under the default (3 sigma: 16% of the mean speedup, and 1.20x -> 1.01x does
    # not cross 1.0 outside noise); a 6% spread (25%) would let it through.
    referee[0] = SlowerReferee(factor=0.84)
    assert replay("slower")[0] == 1
    assert replay("loose", "--run-to-run-cv", "0.06")[0] == 0
    bad = CliRunner().invoke(app, [transcript, "--run-to-run-cv", "-0.1", "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 2


def test_the_printed_report_shows_each_speedups_difference_and_tolerance(
    recorded: Path, tmp_path: Path
) -> None:
    from rich.console import Console

    from agent.cli.transcripts import print_report

    report = replay_run(
        recorded / "transcript.jsonl",
        out=tmp_path / "replay",
        referee=SlowerReferee(factor=0.97),
        arch="sm_90",
    )
    assert not report.diverged
    timed = [step for step in report.steps if step.speedups]
    assert [step.call_id for step in timed] == ["profile_1", "profile_2", "submit"]
    console = Console(record=True, width=250, file=open(os.devnull, "w"))  # noqa: SIM115
    print_report(report, console)
    text = console.export_text()
    assert "vs eager: 1.20x ±0.02 → 1.16x ±0.02: |Δ| 0.036" in text
    assert "vs compile: 1.08x ±0.02 → 1.08x ±0.02: |Δ| 0.000" in text
    assert "rule: speedups agree within their in-run bands or within 3 sigma of a 3.74% run-to-run CV" in text
    assert "closest speedup: step" in report.summary() and "of its tolerance" in report.summary()


@pytest.mark.slow
def test_a_session_with_real_compiles_replays_without_divergence(
    tmp_path: Path, relu_task, build_cache: Path
) -> None:
    out = tmp_path / "recorded"
    referee = FakeReferee(compile_for_real=True)
    result, _ = run_solve(out, pipeline_steps(RELU_PLAN), relu_task, referee=referee, cache_dir=build_cache)
    assert result.status == "submitted"
    report = replay_run(
        out / "transcript.jsonl",
        out=tmp_path / "replay",
        referee=FakeReferee(compile_for_real=True),
        arch="sm_90",
        sandbox_options={"cache_dir": build_cache},
    )
    assert not report.diverged, report.model_dump_json(indent=2)
    compiles = [s for s in report.steps if s.tool == "compile"]
    assert len(compiles) == 3


H200_RUN = (
    Path(__file__).resolve().parents[2]
    / "benchmarks/results/solve-h200/2_Scale_Bias_Sigmoid_Residual-scripted"
)


@pytest.mark.gpu
def test_the_committed_h200_transcript_replays_without_divergence(tmp_path: Path) -> None:
    transcript = H200_RUN / "transcript.jsonl"
    if not transcript.is_file():
        pytest.skip(f"{transcript} is not recorded yet (benchmarks/transcripts_gpu.sh records it)")
    report = replay_run(transcript, out=tmp_path / "replay")
    assert not report.diverged, report.model_dump_json(indent=2)
    final = rejudge_final(transcript, out=tmp_path / "final")
    assert not final.diverged, final.model_dump_json(indent=2)


def test_without_a_gpu_replay_stops_before_re_running_anything(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    import typer

    from agent.cli.transcripts import replay_command

    app = typer.Typer()
    app.command()(replay_command)
    no_gpu = FakeReferee(gpu=None)
    monkeypatch.setattr(agent.run.replay, "default_referee", lambda config: no_gpu)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    transcript = str(recorded / "transcript.jsonl")
    for flags in ([], ["--final-only"]):
        run = CliRunner().invoke(app, [transcript, *flags])
        assert run.exit_code == 2, run.output
        assert "no CUDA GPU" in run.output and "--allow-no-gpu" not in run.output
        assert "diverge" not in run.output
    assert no_gpu.calls == []
    assert list(scratch.iterdir()) == []  # the temporary folders it made are gone
    kept = tmp_path / "given"
    kept.mkdir()
    assert CliRunner().invoke(app, [transcript, "--out", str(kept)]).exit_code == 2
    assert kept.is_dir()  # a folder the user named is theirs


def test_a_successful_replay_keeps_its_temporary_output(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    import typer

    from agent.cli.transcripts import replay_command

    app = typer.Typer()
    app.command()(replay_command)
    monkeypatch.setattr(agent.run.replay, "default_referee", lambda config: FakeReferee())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    run = CliRunner().invoke(app, [str(recorded / "transcript.jsonl"), "--arch", "sm_90"])
    assert run.exit_code == 0, run.output
    (made,) = scratch.iterdir()
    assert (made / "replay.json").is_file() and str(made) in "".join(run.output.split())
