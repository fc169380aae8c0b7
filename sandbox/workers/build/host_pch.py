"""A precompiled header for the torch part of a tier copy's host compile (stdlib only).

nvcc's last step compiles what cudafe++ wrote (`X.cudafe1.cpp`, about 8 MB for a KernelBench
generation) with the host compiler: 5-6 s, most of it parsing the C++ library's and torch's
headers, which cudafe++ has already expanded inline, so torch/extension.h's own PCH cannot serve
it. Every generation built from the same tier copy and toolchain expands those headers to the
same text up to where its slim `ATen/Functions.h` starts including the operators it names,
which slim_aten marks with three no-op pragmas (OPERATORS_BEGIN) that cudafe++ passes through.
That text, the prefix, is cut off there, precompiled once per (compiler, flags, prefix) into the
shared cache, and each later compile parses only the rest with `-include prefix.h` (5.0 -> 2.4 s
on the 2-core machine).

Two things in the prefix would differ between generations; both are made the same:
- the build folder's path in line markers, written as a placeholder in prefix.h (markers only
  place diagnostics, and a tier copy's diagnostics are never the ones reported: a tier that
  fails is built again, and errors come from the original as written);
- the module id cudafe++ names anonymous namespaces after (libcu++ declares one):
  nvcc_parallel hands both front ends one id per file name instead of a digest of the file.
  nvcc's ids keep the hidden names of two .cu files of one library apart; a tier copy is
  load_inline's only .cu, and hidden names never cross libraries.

g++ uses a .gch only when it is valid for the flags (-Winvalid-pch says why not), and parses
prefix.h's text otherwise. When anything here does not hold (no cut, the header does not build,
the rest does not compile), the step is the plain compile nvcc would run.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from inline_build import locked
from slim_aten import OPERATORS_BEGIN

PREFIX = "prefix.h"
PLACEHOLDER = "/kernel-agent-build"  # the build folder's path in prefix.h
FAILED = "failed.log"  # beside prefix.h: its header did not build, do not try again
_TEXT = {"encoding": "utf-8", "errors": "surrogateescape"}  # cudafe++ writes literals' bytes as they are
_MARKER = re.compile(r'# \d+ "[^"]*"')
_BRACE_OR_LITERAL = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|[{}]')
# Pragmas with a stack g++ may not carry across a precompiled header: balanced in the prefix.
_STACKED = (
    ("#pragma GCC visibility push", "#pragma GCC visibility pop"),
    ("#pragma pack(push", "#pragma pack(pop"),
    ("#pragma GCC push_options", "#pragma GCC pop_options"),
)


def module_id(source: str) -> str:
    """The id both front ends read for a tier copy, in nvcc's shape (`_hash_len_name_hash`)."""
    name = re.sub(r"\W", "_", Path(source).name)
    digest = hashlib.sha256(f"kernel-agent host pch {name}".encode()).hexdigest()
    return f"_{digest[:8]}_{len(name)}_{name}_{digest[8:16]}"


def cut(lines: list[str]) -> int | None:
    """Index of the line the rest starts at: OPERATORS_BEGIN, outside any braces and pragma
    stacks; None when it is not there."""
    depth, begin = 0, [line + "\n" for line in OPERATORS_BEGIN]
    for index, line in enumerate(lines):
        if line.startswith("#"):
            if line == begin[0] and lines[index : index + len(begin)] == begin:
                return index if depth == 0 and _balanced(lines[:index]) else None
            continue
        for token in _BRACE_OR_LITERAL.findall(line):
            depth += 1 if token == "{" else -1 if token == "}" else 0
    return None


def _balanced(prefix: list[str]) -> bool:
    pragmas = [line for line in prefix if line.startswith("#pragma")]
    return all(
        sum(p.replace(" ", "").startswith(push.replace(" ", "")) for p in pragmas)
        == sum(p.replace(" ", "").startswith(pop.replace(" ", "")) for p in pragmas)
        for push, pop in _STACKED
    )


def _last_marker(prefix: list[str]) -> str:
    """The last line marker naming a file: the rest starts in that file, as the original does."""
    return next((line for line in reversed(prefix) if _MARKER.match(line)), "")


def compile_host(
    argv: list[str], env: dict[str, str], cache: Path, build_dir: str
) -> tuple[subprocess.CompletedProcess[bytes] | None, str]:
    """Run the host compile `argv` with the prefix precompiled: its result (None when the caller
    should run `argv` as it is) and what was done, for the step's log."""
    source = next((Path(a) for a in argv if a.endswith(".cudafe1.cpp")), None)
    if source is None or "-o" not in argv:
        return None, "plain: no cudafe++ output"
    lines = source.read_text(**_TEXT).splitlines(keepends=True)
    at = cut(lines)
    if at is None:
        return None, "plain: no cut"
    prefix = "".join(lines[:at]).replace(build_dir, PLACEHOLDER)
    flags = [a.replace(build_dir, PLACEHOLDER) for a in _without_io(argv, source)]
    key = hashlib.sha256(json.dumps([flags, prefix]).encode()).hexdigest()[:20]
    folder = cache / key
    header = folder / PREFIX
    if (folder / FAILED).is_file():
        return None, f"plain: {key} does not build"
    if not Path(f"{header}.gch").is_file():
        with ThreadPoolExecutor(max_workers=1) as pool:  # the first of a prefix waits for nothing
            plain = pool.submit(subprocess.run, argv, env=env, capture_output=True)
            _build_header(argv, source, env, folder, prefix)
            return plain.result(), f"plain, made {key}"
    if header.read_text(**_TEXT) != prefix:
        return None, f"plain: {key} holds another prefix"
    rest = source.with_name(source.name.replace(".cudafe1.cpp", ".cudafe1.rest.cpp"))
    rest.write_text(_last_marker(lines[:at]) + "".join(lines[at:]), **_TEXT)
    done = subprocess.run(
        [*_with_input(argv, source, rest), "-include", str(header), "-Winvalid-pch"],
        env=env,
        capture_output=True,
    )
    if done.returncode != 0:
        return None, f"plain: the rest did not compile with {key}"
    return done, f"{key}, {len(lines) - at} of {len(lines)} lines"


def _without_io(argv: list[str], source: Path) -> list[str]:
    at = argv.index("-o")
    return [a for i, a in enumerate(argv) if i not in (at, at + 1) and a != str(source)]


def _with_input(argv: list[str], source: Path, replacement: Path) -> list[str]:
    return [str(replacement) if a == str(source) else a for a in argv]


def _build_header(argv: list[str], source: Path, env: dict[str, str], folder: Path, prefix: str) -> None:
    """prefix.h and its .gch, made by the first compile that needs them; a header that does not
    build is remembered in failed.log and never tried again."""
    with locked(folder):
        header = folder / PREFIX
        gch = Path(f"{header}.gch")
        if gch.is_file() or (folder / FAILED).is_file():
            return
        header.write_text(prefix, **_TEXT)
        command = [*_without_io(argv, source), "-x", "c++-header", str(header), "-o", f"{gch}.tmp"]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            (folder / FAILED).write_text(" ".join(command) + "\n" + done.stdout + done.stderr)
            return
        Path(f"{gch}.tmp").rename(gch)
