"""build: agent/build/compile.py -> build.py."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class WorkspaceBuildSpec(TypedDict):
    """build.py's argv[1] for a workspace. `config_hash` is the hash of everything else and the
    arch (build.ninja is reused while it matches); the worker adds cuBLAS/cuDNN flags when
    `link_vendor_libraries` is set."""

    kind: Literal["workspace"]
    name: str
    sources: list[str]
    build_dir: str
    cache_dir: str
    cflags: list[str]
    cuda_cflags: list[str]
    link_vendor_libraries: NotRequired[bool]
    ldflags: NotRequired[list[str]]
    include_dirs: NotRequired[list[str]]
    entry: NotRequired[str]  # model_new.py: imported after the build (load_check.py)
    reference: NotRequired[str]  # reference.py: its Model's state_dict is what ModelNew's must match
    config_hash: str
    content_hash: str


class SingleFileBuildSpec(TypedDict):
    """build.py's argv[1] for a single-file solution (imported once so load_inline builds)."""

    kind: Literal["single_file"]
    solution: str
    build_dir: str
    cache_dir: str
    config_hash: str
    content_hash: str


BuildSpec = WorkspaceBuildSpec | SingleFileBuildSpec


class BuildOutcome(TypedDict):
    """What one build did: mode up_to_date | ninja (incremental) | configure (full)."""

    ok: bool
    log: str
    mode: str
    module: str | None
    pch: NotRequired[bool]  # whether the precompiled torch header was usable (configure only)
    phases: NotRequired[dict[str, float]]  # single files: import_torch_s, solution_s (its load_inline)
    notes: NotRequired[list[str]]  # load check steps that could not run here (workspace)


class BuildResult(BuildOutcome):
    """build.py's result line."""

    duration_s: float
    niceness: int


class BuiltStamp(TypedDict):
    """The host's stamp of the last good build, in the sandbox's build cache (so a sandbox can
    write it too: a forged one can only make the host skip a build)."""

    content_hash: str
    config_hash: str
