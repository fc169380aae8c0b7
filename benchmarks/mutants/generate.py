"""Mutants of CUDA sources: every site of every fault class inside device code (the bodies of
`__global__` and `__device__` functions), comments and preprocessor lines left alone.

usage: python -m benchmarks.mutants.generate [--per-class N] [--seed S] [ROOT ...]
lists how many mutants each class has in the corpus (default: benchmarks/solutions' correct
solutions and skills/templates/kernels) and prints a sample of them.
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from benchmarks.mutants.operators import FAULT_CLASSES, HEADERS, REWRITES, Mutant

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "benchmarks" / "solutions"
TEMPLATE_KERNELS = REPO / "skills" / "templates" / "kernels"
SOURCE_SUFFIXES = (".cu", ".cuh")

_DEVICE_FN = re.compile(r"\b(__global__|__device__)\b")


def _strip_comments(text: str) -> str:
    """The text with comments blanked (same length and line breaks, so offsets still match)."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, text, flags=re.DOTALL)


def device_lines(text: str) -> set[int]:
    """0-based numbers of the lines inside `__global__`/`__device__` function bodies."""
    code = _strip_comments(text)
    lines: set[int] = set()
    for match in _DEVICE_FN.finditer(code):
        start = code.find("{", match.end())
        stop = code.find(";", match.end())
        if start < 0 or (0 <= stop < start and "(" not in code[match.end() : stop]):
            continue
        if 0 <= stop < start:  # a declaration without a body
            continue
        depth, end = 0, start
        for end in range(start, len(code)):
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            if depth == 0:
                break
        first, last = code.count("\n", 0, start), code.count("\n", 0, end)
        lines.update(range(first, last + 1))
    return lines


def mutate_source(text: str, file: str, classes: Iterable[str] = FAULT_CLASSES) -> list[Mutant]:
    """Every mutant of `text` for the given classes, in file order within each class."""
    wanted = list(classes)
    unknown = [name for name in wanted if name not in REWRITES]
    if unknown:
        raise ValueError(f"unknown fault class {unknown[0]!r}; choose from: {', '.join(FAULT_CLASSES)}")
    lines = text.split("\n")
    code_lines = _strip_comments(text).split("\n")
    inside = device_lines(text)
    mutants: list[Mutant] = []
    for fault_class in wanted:
        seen: set[tuple[int, str]] = set()
        for number in sorted(inside):
            code = code_lines[number]
            if not code.strip() or code.lstrip().startswith("#"):
                continue
            comment = lines[number][len(code.rstrip()) :] if lines[number].startswith(code.rstrip()) else ""
            for variant in REWRITES[fault_class](code.rstrip(), text):
                if variant == code.rstrip() or (number, variant) in seen:
                    continue
                seen.add((number, variant))
                changed = [*lines[:number], variant + comment, *lines[number + 1 :]]
                mutated = HEADERS.get(fault_class, "") + "\n".join(changed)
                mutants.append(
                    Mutant(
                        fault_class=fault_class,
                        file=file,
                        line=number + 1,
                        before=lines[number].strip(),
                        after=variant.strip(),
                        text=mutated,
                    )
                )
    return mutants


def correct_solutions(root: Path = SOLUTIONS) -> list[Path]:
    """Solution folders that must be judged correct (the `__broken_*` ones are already faulty)."""
    return sorted(p for p in root.glob("level*/*") if p.is_dir() and "__" not in p.name)


def sources_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())


def corpus_mutants(roots: Iterable[Path], classes: Iterable[str] = FAULT_CLASSES) -> Iterator[Mutant]:
    """Mutants of every CUDA source under each root (a solution folder or a kernels folder); a
    mutant's `file` is its path relative to the repository."""
    wanted = list(classes)
    for root in roots:
        for source in sources_of(root) if root.is_dir() else [root]:
            yield from mutate_source(source.read_text(), str(source.resolve().relative_to(REPO)), wanted)


def sample(mutants: Iterable[Mutant], per_class: int, seed: int) -> list[Mutant]:
    """At most `per_class` mutants of each class, drawn with `seed` (the benchmark's sample)."""
    by_class: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        by_class.setdefault(mutant.fault_class, []).append(mutant)
    rng = random.Random(seed)
    picked: list[Mutant] = []
    for fault_class in FAULT_CLASSES:
        group = by_class.get(fault_class, [])
        picked.extend(rng.sample(group, min(per_class, len(group))))
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("roots", nargs="*", type=Path)
    parser.add_argument("--per-class", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    roots = args.roots or [*correct_solutions(), TEMPLATE_KERNELS]
    everything = list(corpus_mutants(roots))
    for fault_class in FAULT_CLASSES:
        print(f"{fault_class:18} {sum(m.fault_class == fault_class for m in everything):6} mutants")
    for mutant in sample(everything, args.per_class, args.seed):
        print(f"{mutant.fault_class}: {mutant.file}:{mutant.line}\n  - {mutant.before}\n  + {mutant.after}")


if __name__ == "__main__":
    main()
