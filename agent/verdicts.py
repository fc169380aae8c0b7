"""The referee's verdicts: the one vocabulary its EvalResult and the transcript's records are typed with.

It sits at the top level, below the transcripts, because the transcript records a verdict and may
not import the referee (pyproject.toml [tool.importlinter])."""

from __future__ import annotations

from typing import Literal

Verdict = Literal[
    "correct",
    "incorrect",
    "policy_violation",
    "compile_error",
    "runtime_error",
    "timeout",
    "no_gpu",
    "referee_error",
]
"""What the referee concluded of one solution (EvalResult.verdict, the transcript's evaluation
events and run_end's candidates)."""
