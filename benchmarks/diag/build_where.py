"""Where the build worker's extra compile time comes from (issue 17): the same routed load_inline
build (`build_phases.sh`) run plainly and inside the local sandbox (bubblewrap, its cgroup, its
private /tmp), each from a fresh extensions folder; the build worker's niceness only matters
beside other work, so it is left out.

    python benchmarks/diag/build_where.py SOLUTION.py OUT_DIR
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from sandbox.base import open_sandbox  # noqa: E402


def main() -> None:
    solution, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    script = str(REPO / "benchmarks/diag/build_phases.sh")
    lines = []

    def record(label: str, seconds: float, folder: Path) -> None:
        phases = (folder / "phases.txt").read_text() if (folder / "phases.txt").exists() else ""
        builds = [ln for ln in phases.splitlines() if ln.startswith("load_inline build")]
        lines.append(f"## {label}: {seconds:.1f} s in all\n" + "\n".join(builds))
        print(lines[-1], flush=True)
        ninja = folder / "ninja_log.txt"
        if ninja.exists():
            lines.append("```\n" + ninja.read_text() + "```")

    workspace = Path(tempfile.mkdtemp(prefix="build-where-"))
    cache = workspace / "toolchain-cache"  # one precompiled header for both runs
    folder = out / "plain"
    start = time.monotonic()
    env = {**os.environ, "BUILD_PHASES_CACHE": str(cache)}
    subprocess.run(["bash", script, str(solution), str(folder)], cwd=REPO, env=env, check=False)
    record("plain", time.monotonic() - start, folder)

    (workspace / "solution.py").write_bytes(solution.read_bytes())
    box = open_sandbox("local", workspace=workspace, cache_dir=workspace / "cache")
    folder = workspace / "sandbox"
    start = time.monotonic()
    result = box.exec(
        [
            "bash",
            "-c",
            f"cd {REPO} && BUILD_PHASES_CACHE={cache} bash {script} {workspace / 'solution.py'} {folder}",
        ],
        timeout=600,
    )
    if not result.ok:
        print(result.describe_failure(), file=sys.stderr)
    record("sandbox", time.monotonic() - start, folder)
    subprocess.run(["cp", "-r", str(folder), str(out)], check=False)
    (out / "build_where.md").write_text("\n\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
