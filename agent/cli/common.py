"""What every `agent` command shares: the two consoles, `fail`, and the option types.

An option type is `Annotated[type, typer.Option(...)]`; where a command words an option's help
its own way, it builds the same option with that help from the factory next to the type (for
example `sandbox_option("Where the candidate runs: local, docker or auto.")`). Defaults stay in
the commands' signatures. Nothing here imports the referee (it imports torch): `agent --help`
stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from agent.budget import BUDGET_FLAG_HELP
from agent.gpus import gpu_listed

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # paths in messages stay whole

EXIT_USAGE = 2
"""A usage or setup error: a bad flag, a missing file or key, a sandbox that cannot start."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print `error: MESSAGE` on one line of stderr and end the command with exit status `code`."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


Options = TypeVar("Options")


def checked_options(build: Callable[..., Options], /, **fields: Any) -> Options:
    """`build(**fields)` for an options model (agent.referee.EvalOptions and kin); a value it
    rejects ends the command with `fail` and the validator's own message."""
    from pydantic import ValidationError

    try:
        return build(**fields)
    except ValidationError as exc:
        from agent.referee.options import validation_message

        fail(validation_message(exc))


# -- where and what for ----------------------------------------------------------------------


def sandbox_option(help: str = "Where untrusted code runs: local, docker or auto.", **kwargs: Any) -> Any:
    return typer.Option("--sandbox", help=help, **kwargs)


def arch_option(
    help: str = "GPU architecture to build for (sm_90, 9.0, ...); default: the visible GPU.", **kwargs: Any
) -> Any:
    return typer.Option("--arch", help=help, **kwargs)


def json_flag(help: str = "Print the pydantic result as JSON.", **kwargs: Any) -> Any:
    return typer.Option("--json", help=help, **kwargs)


def budget_option(
    help: str = f"Limits: {BUDGET_FLAG_HELP}. Defaults: turns=40,usd=10,wall=1h,gpu=15m.", **kwargs: Any
) -> Any:
    return typer.Option("--budget", help=help, **kwargs)


def unsandboxed_option(
    help: str = "Run untrusted code with no sandbox isolation, for machines without bubblewrap (at your "
    "own risk; the transcript and report say `unsandboxed`).",
    **kwargs: Any,
) -> Any:
    return typer.Option("--unsandboxed", envvar="KERNEL_AGENT_UNSANDBOXED", help=help, **kwargs)


def check_confinement(sandbox: str, unsandboxed: bool) -> None:
    """Before a command runs untrusted code (and before it writes anything): --unsandboxed is
    recorded for every local sandbox this run opens; otherwise a local sandbox that could not
    confine that code ends the command with one line. Docker confines by itself; `auto` is
    checked when the sandbox opens."""
    from sandbox.unsandboxed import accept_unsandboxed, confinement_problem, refusal

    if unsandboxed:
        accept_unsandboxed()
        err_console.print(
            "[yellow]warning:[/] --unsandboxed: untrusted code runs with no sandbox isolation",
            highlight=False,
        )
        return
    if sandbox == "local" and (problem := confinement_problem()) is not None:
        fail(refusal(problem))


DEFAULT_INSPECT_TIMEOUT_S = 120.0
"""How long one task file may take to run once (import, get_init_inputs, get_inputs, Model) when
its input spec is learned; a task that sleeps or loops is reported after this."""


def inspect_timeout_option(
    help: str = "Seconds each task file may take to run once (in the sandbox) to learn its inputs.",
    *other_names: str,
    **kwargs: Any,
) -> Any:
    return typer.Option("--inspect-timeout", *other_names, help=help, **kwargs)


InspectTimeoutOpt = Annotated[float, inspect_timeout_option()]
SandboxOpt = Annotated[str, sandbox_option()]
UnsandboxedFlag = Annotated[bool, unsandboxed_option()]
ArchOpt = Annotated[str | None, arch_option()]
JsonFlag = Annotated[bool, json_flag()]
BudgetOpt = Annotated[str | None, budget_option()]
"""An agent run's limits, as a `--budget` spec (agent.budget.BudgetLimits.with_spec)."""


# -- the referee's options (agent.referee.EvalOptions) -----------------------------------------


def policy_option(
    help: str = "Referee policy: strict (no torch compute) or kernelbench.", **kwargs: Any
) -> Any:
    return typer.Option("--policy", help=help, **kwargs)


def trials_option(help: str = "Correctness trials, fresh secret seeds each.", **kwargs: Any) -> Any:
    return typer.Option("--trials", help=help, **kwargs)


def profile_option(help: str = "Time and profile after verifying.", **kwargs: Any) -> Any:
    return typer.Option("--profile/--no-profile", help=help, **kwargs)


def compile_mode_option(
    help: str = "torch.compile mode of the baseline; 'none' skips it.", **kwargs: Any
) -> Any:
    return typer.Option("--compile-mode", help=help, **kwargs)


def refresh_baselines_option(
    help: str = "Re-time eager and torch.compile instead of using the cache.",
    *,
    negatable: bool = False,
    **kwargs: Any,
) -> Any:
    flags = "--refresh-baselines/--no-refresh-baselines" if negatable else "--refresh-baselines"
    return typer.Option(flags, help=help, **kwargs)


PRECISION_CHOICES = ("fp32", "tf32", "fp16", "bf16", "match")
"""agent.referee.policy.PRECISIONS, spelled here so that `agent --help` does not import torch
(tests/cli keeps the two equal)."""


def check_precision(value: str) -> str:
    """The `--precision` callback: a value outside PRECISION_CHOICES ends the command naming the flag."""
    if value not in PRECISION_CHOICES:
        fail(f"--precision {value!r}: unknown precision; choose one of {', '.join(PRECISION_CHOICES)}")
    return value


def precision_option(
    help: str = "Arithmetic a candidate may use: fp32 (strict, the default), tf32, fp16, bf16, or match "
    "(any; speedups against baselines at the precision measured). Sets the tolerances and the "
    "baselines' flags; the judge measures the candidate's (docs/precision.md).",
    **kwargs: Any,
) -> Any:
    return typer.Option("--precision", help=help, callback=check_precision, **kwargs)


PolicyOpt = Annotated[str, policy_option()]
PrecisionOpt = Annotated[str, precision_option()]
TrialsOpt = Annotated[int, trials_option(min=1)]
ProfileOpt = Annotated[bool, profile_option()]
CompileModeOpt = Annotated[str, compile_mode_option()]
RefreshBaselinesOpt = Annotated[bool, refresh_baselines_option()]


# -- a cheap GPU check -------------------------------------------------------------------------


def gpu_visible() -> bool:
    """Whether a CUDA GPU is visible to this process, without importing torch (agent.gpus). Commands
    that need a GPU call this after validating their inputs and before any heavy import or work."""
    return gpu_listed()


CONTEXT_TOKENS_HELP = (
    "Estimated input tokens per model request (e.g. 64k; default 100000): older turns are folded "
    "into one line each to stay under it. off: the whole history every turn."
)


def request_timeout_option(request_timeout: str | None) -> float:
    """Seconds a `--request-timeout` value asks for; the default when not given."""
    from agent.models.base import DEFAULT_REQUEST_TIMEOUT_S
    from agent.models.registry import parse_request_timeout

    if request_timeout is None:
        return DEFAULT_REQUEST_TIMEOUT_S
    try:
        return parse_request_timeout(request_timeout)
    except ValueError as exc:
        fail(str(exc))


def context_options(context_tokens: str | None) -> dict[str, int]:
    """The SolveConfig field a `--context-tokens` value sets (none when not given)."""
    if context_tokens is None:
        return {}
    from agent.run.context import ContextSpecError, parse_context_tokens

    try:
        return {"context_tokens": parse_context_tokens(context_tokens)}
    except ContextSpecError as exc:
        fail(str(exc))


# -- output folders ----------------------------------------------------------------------------


def check_output_folder(flag: str, folder: Path, *, named: Path | None = None) -> None:
    """`flag FOLDER` names a folder this command may create or write: an existing folder, or a new one
    whose nearest existing parent is a folder that takes new entries. The probe (a temporary folder,
    removed at once) catches what permissions do not show: /proc, a read-only mount, root's view.
    `named`: the path the message names (an output file in `folder`)."""
    import os
    import tempfile

    named = named or folder

    if folder.exists() and not folder.is_dir():
        fail(f"{flag} {named}: exists and is not a folder")
    parent = next((p for p in [folder.absolute(), *folder.absolute().parents] if p.exists()), None)
    if parent is None or not parent.is_dir():
        fail(f"{flag} {named}: {parent} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".agent-write-check-", dir=parent))
    except OSError as exc:
        fail(f"{flag} {named}: cannot write in {parent} ({exc.strerror or exc}); pick another folder")


def check_count(flag: str, value: int | None, what: str) -> None:
    """A count flag (workers, tasks in flight) is at least 1 when given."""
    if value is not None and value < 1:
        fail(f"{flag} {value}: give at least 1 ({what})")


def check_seconds(flag: str, value: float) -> None:
    """A time limit flag is a finite number of seconds above zero."""
    import math

    if not math.isfinite(value) or value <= 0:
        fail(f"{flag} {value:g}: give a number of seconds above 0")
