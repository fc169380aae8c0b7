"""nvcc for one .cu and one GPU architecture, its steps run as a graph instead of in a row
(stdlib only): `python3 nvcc_parallel.py NVCC ARGS...` does what `NVCC ARGS...` does.

nvcc compiles such a file in seven steps, one after another (`nvcc --dryrun` lists them):

    host preprocess -> cudafe++ (host front end) ----------------------------> host compile
    device preprocess -> cicc (device front end) -> ptxas -> fatbinary ------^

cicc waits for cudafe++ only to read the module id file cudafe++ writes. cicc can write that id
itself (`--gen_module_id_file`): a digest of the file's name and contents, the same bytes. So the
two front ends run side by side and the host compile starts when both branches are done: a
KernelBench generation parses torch's headers in each front end, about 4-7 s apiece.

The commands, flags and outputs are nvcc's own; only their order changes. The two module ids are
compared, and cicc runs again on cudafe++'s should they ever differ. Anything else (several
architectures, relocatable device code, a step it does not know) runs nvcc as is. A failing
step's output is printed and its exit status returned, the first failure in nvcc's order.

`nvcc_parallel.py --host-pch CACHE NVCC ARGS...` (inline_build, for a tier copy) also gives both
front ends one module id per file name and compiles the host side with the torch part of
cudafe++'s output precompiled in CACHE (host_pch.py).
NVCC_PARALLEL_TIMES=FILE appends each compile's step spans to FILE (benchmarks/diag).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
import host_pch

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
TIMES_ENV = "NVCC_PARALLEL_TIMES"  # a file: each compile's step spans appended (diagnostics)
_UNESCAPED_SPACE = re.compile(r"(?<!\\)\s+")  # a depfile escapes a space in a path as "\ "
_ORDER = ("host_pp", "device_pp", "cudafe", "cicc", "ptxas", "fatbinary", "host_cc")


@dataclass
class Step:
    kind: str
    argv: list[str]
    returncode: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    span: tuple[float, float] = (0.0, 0.0)  # monotonic start and end
    note: str = ""  # how it ran, where that varies (the host compile: host_pch)


def main(argv: list[str]) -> int:
    pch_cache = None
    if argv[:1] == ["--host-pch"]:
        pch_cache, argv = Path(argv[1]), argv[2:]
    nvcc, args = argv[0], argv[1:]
    with tempfile.TemporaryDirectory(prefix="nvcc-parallel-") as keep:
        try:
            plan = _plan(nvcc, args, Path(keep))
        except (ValueError, OSError):  # a dry run it cannot read (shlex) or run: nvcc's own way
            plan = None
        if plan is None:
            return subprocess.call([nvcc, *args])
        env, steps, depfile = plan
        prefix_pch = _HostPch.of(args, pch_cache) if pch_cache else None
        if prefix_pch and not _same_module_ids(steps, Path(keep) / "module_id", prefix_pch.source):
            prefix_pch = None
        return _run(steps, env, depfile, Path(keep), prefix_pch)


def _plan(
    nvcc: str, args: list[str], keep: Path
) -> tuple[dict[str, str], dict[str, Step], Path | None] | None:
    """nvcc's steps for these arguments, keyed by what they are; None when they are not the seven
    of a plain one-architecture compile."""
    if "-c" not in args or any(
        a in args for a in ("-rdc=true", "--relocatable-device-code=true", "-dc", "-E")
    ):
        return None
    dry = subprocess.run(
        [nvcc, *args, "--keep", "--keep-dir", str(keep), "--dryrun"], capture_output=True, text=True
    )
    if dry.returncode != 0:
        return None
    env = dict(os.environ)
    steps: dict[str, Step] = {}
    depfile: Path | None = None
    for line in dry.stderr.splitlines():
        if not line.startswith("#$ "):
            continue
        text = line[3:].strip()
        assign = _ASSIGN.match(text)
        if assign and " " not in assign.group(1):
            name, value = assign.groups()
            env[name] = _unquote(value.strip())
            continue
        if text.startswith("-- Filter Dependencies --"):
            depfile = Path(text.split(">", 1)[1].strip())
            continue
        if text.startswith("rm "):
            continue
        argv = _command(text, env)
        kind = _kind(argv)
        if kind is None or kind in steps:
            return None
        steps[kind] = Step(kind, argv)
    if set(steps) != set(_ORDER):
        return None
    if depfile is not None:  # nvcc's: the headers of both preprocessings, for ninja
        target = args[args.index("-o") + 1] if "-o" in args else None
        if target is None:
            return None
        for kind in ("host_pp", "device_pp"):
            steps[kind].argv += ["-MD", "-MF", str(keep / f"{kind}.d"), "-MT", target]
    cicc = steps["cicc"].argv
    if "--module_id_file_name" not in cicc or "--gen_module_id_file" in cicc:
        return None
    at = cicc.index("--module_id_file_name")
    cicc[at : at + 2] = ["--gen_module_id_file", "--module_id_file_name", str(keep / "cicc.module_id")]
    return env, steps, depfile


def _unquote(value: str) -> str:
    parts = shlex.split(value) if value else []
    return parts[0] if len(parts) == 1 else value


def _command(text: str, env: dict[str, str]) -> list[str]:
    """The command's argv, nvcc's shell variables expanded and its output redirections dropped
    (the output is captured here instead)."""
    argv = shlex.split(_VARIABLE.sub(lambda m: env.get(m.group(1), ""), text))
    kept: list[str] = []
    skip = False
    for token in argv:
        if skip:
            skip = False
            continue
        if token in (">", "2>"):
            skip = True
            continue
        if token.startswith(("2>", ">")):
            continue
        kept.append(token)
    return kept


def _kind(argv: list[str]) -> str | None:
    tool = Path(argv[0]).name
    output = argv[argv.index("-o") + 1] if "-o" in argv[:-1] else ""
    if tool == "cudafe++":
        return "cudafe"
    if tool == "cicc":
        return "cicc"
    if tool == "ptxas":
        return "ptxas"
    if tool == "fatbinary":
        return "fatbinary"
    if "-E" in argv and output.endswith(".cpp4.ii"):
        return "host_pp"
    if "-E" in argv and output.endswith(".cpp1.ii"):
        return "device_pp"
    if "-c" in argv and any(a.endswith(".cudafe1.cpp") for a in argv):
        return "host_cc"
    return None


@dataclass
class _HostPch:
    """Where the host compile's precompiled prefix lives, and what it is cut by."""

    cache: Path
    source: str  # the .cu

    @classmethod
    def of(cls, args: list[str], cache: Path) -> _HostPch | None:
        sources = [a for a in args if a.endswith(".cu")]
        if len(sources) != 1:
            return None
        return cls(cache, str(Path(sources[0]).resolve()))

    def compile(self, step: Step, env: dict[str, str]) -> bool:
        started = time.monotonic()
        try:
            done, step.note = host_pch.compile_host(step.argv, env, self.cache, str(Path(self.source).parent))
        except Exception as exc:  # any trouble here costs time, never the build
            done, step.note = None, f"plain: {exc!r}"
        if done is None:
            return _execute(step, env)
        step.returncode, step.stdout, step.stderr = done.returncode, done.stdout, done.stderr
        step.span = (started, time.monotonic())
        return done.returncode == 0


def _same_module_ids(steps: dict[str, Step], path: Path, source: str) -> bool:
    """cudafe++ and cicc read one id for this file name (host_pch) instead of each making one;
    False, nothing changed, where cudafe++ makes no id."""
    cudafe, cicc = steps["cudafe"].argv, steps["cicc"].argv
    if "--gen_module_id_file" not in cudafe or "--module_id_file_name" not in cudafe:
        return False
    path.write_text(host_pch.module_id(source))
    for argv in (cudafe, cicc):
        if "--gen_module_id_file" in argv:
            argv.remove("--gen_module_id_file")
        argv[argv.index("--module_id_file_name") + 1] = str(path)
    return True


def _execute(step: Step, env: dict[str, str]) -> bool:
    started = time.monotonic()
    done = subprocess.run(step.argv, env=env, capture_output=True)
    step.returncode, step.stdout, step.stderr = done.returncode, done.stdout, done.stderr
    step.span = (started, time.monotonic())
    return done.returncode == 0


def _chain(kinds: tuple[str, ...], steps: dict[str, Step], env: dict[str, str]) -> bool:
    return all(_execute(steps[kind], env) for kind in kinds)


def _run(
    steps: dict[str, Step],
    env: dict[str, str],
    depfile: Path | None,
    keep: Path,
    prefix_pch: _HostPch | None,
) -> int:
    with ThreadPoolExecutor(max_workers=2) as pool:
        host = pool.submit(_chain, ("host_pp", "cudafe"), steps, env)
        device = pool.submit(_chain, ("device_pp", "cicc", "ptxas", "fatbinary"), steps, env)
        ok = host.result() and device.result()
    if ok and not _same_module_id(steps):
        ok = _rerun_device_with_host_id(steps, env)
    if prefix_pch is not None:
        ok = ok and prefix_pch.compile(steps["host_cc"], env)
    else:
        ok = ok and _execute(steps["host_cc"], env)
    if times := os.environ.get(TIMES_ENV):
        _append_times(Path(times), steps)
    for kind in _ORDER:
        step = steps[kind]
        if step.stdout or step.stderr or step.returncode:
            sys.stdout.buffer.write(step.stdout)
            sys.stderr.buffer.write(step.stderr)
        if step.returncode:
            sys.stdout.flush()
            return step.returncode
    if not ok:
        return 1
    if depfile is not None:
        _write_depfile(depfile, keep)
    return 0


def _append_times(path: Path, steps: dict[str, Step]) -> None:
    """One JSON line per compile: each step's start and end in seconds from the first start."""
    zero = min(step.span[0] for step in steps.values() if step.span[0])
    spans: dict[str, object] = {
        k: [round(s.span[0] - zero, 3), round(s.span[1] - zero, 3)] for k, s in steps.items() if s.span[0]
    }
    if steps["host_cc"].note:
        spans["host_cc_note"] = steps["host_cc"].note
    with path.open("a") as out:
        out.write(json.dumps(spans) + "\n")


def _write_depfile(depfile: Path, keep: Path) -> None:
    target = ""
    headers: dict[str, None] = {}
    for kind in ("host_pp", "device_pp"):
        text = (keep / f"{kind}.d").read_text().replace("\\\n", " ")
        target, _, deps = text.partition(": ")
        headers.update(dict.fromkeys(h for h in _UNESCAPED_SPACE.split(deps) if h))
    depfile.write_text(f"{target}: " + " \\\n ".join(headers) + "\n")


def _module_ids(steps: dict[str, Step]) -> tuple[Path, Path]:
    cudafe, cicc = steps["cudafe"].argv, steps["cicc"].argv
    return (
        Path(cudafe[cudafe.index("--module_id_file_name") + 1]),
        Path(cicc[cicc.index("--module_id_file_name") + 1]),
    )


def _same_module_id(steps: dict[str, Step]) -> bool:
    host, device = _module_ids(steps)
    return host.read_bytes() == device.read_bytes()


def _rerun_device_with_host_id(steps: dict[str, Step], env: dict[str, str]) -> bool:
    """nvcc's own order for the device branch: cicc reading the id cudafe++ wrote."""
    host, _ = _module_ids(steps)
    cicc = steps["cicc"].argv
    cicc.remove("--gen_module_id_file")
    cicc[cicc.index("--module_id_file_name") + 1] = str(host)
    return _chain(("cicc", "ptxas", "fatbinary"), steps, env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
