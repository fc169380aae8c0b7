"""Product files describe what the product does, never how it was developed.

README.md, docs/, agent/, sandbox/ and tests/ are read by users: a line that speaks of numbered
sessions, issue numbers, rounds of work or which machine happened to be available is a logbook
entry, and belongs (if anywhere) with the dated results under benchmarks/results/.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECKED = ("README.md", "docs", "agent", "sandbox", "tests")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".cu", ".cuh", ".h", ".cpp", ".toml", ".txt", ".yaml", ".yml", ".j2"}
THIS_FILE = Path(__file__).resolve()

_ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
    "fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth"
)

# Each pattern is precise enough to leave the product's own vocabulary alone: a process or pytest
# "session", the RL and tuning `session` modules, "round" in rounding or tuning rounds.
DEVELOPMENT_WORDS: dict[str, re.Pattern[str]] = {
    "a numbered session or round of work": re.compile(rf"\b({_ORDINALS})[ -](session|round)s?\b", re.I),
    "the session doing the work": re.compile(
        r"\b(this|previous|last|next|earlier|later|current) session\b|\bsession's device time\b", re.I
    ),
    "an issue number or its part": re.compile(
        r"\bissues?\s*#?\d+|#\d+ part \d|\(part \d\)|\bis part \d\)", re.I
    ),
    "the issue as a reference": re.compile(r"\bthe issue'?s?\b(?! with)", re.I),
    "a round of work": re.compile(r"\b(this|previous|next|last) round\b|\brounds? of work\b", re.I),
    "which machine happened to be available": re.compile(
        r"\bmachine was lost\b|\blent (H200|GPU|machine)|\b(was|were|is) not (reachable|built|run|measured) here\b"
        r"|\bnot (reachable|tested) here\b"
        r"|\bdevice time (ran out|went to)\b",
        re.I,
    ),
}


def product_files() -> list[Path]:
    files: list[Path] = []
    for name in CHECKED:
        root = REPO / name
        if root.is_file():
            files.append(root)
            continue
        for path in sorted(root.rglob("*")):
            checked = path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
            if checked and path.resolve() != THIS_FILE:
                files.append(path)
    return files


def development_words(text: str) -> list[tuple[int, str, str]]:
    """(line number, what kind of word, the line) for every line that speaks of development."""
    hits = []
    for number, line in enumerate(text.splitlines(), start=1):
        for kind, pattern in DEVELOPMENT_WORDS.items():
            if pattern.search(line):
                hits.append((number, kind, line.strip()))
    return hits


def test_no_product_file_speaks_of_how_the_product_is_developed() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {kind}: {line[:120]}"
        for path in product_files()
        for number, kind, line in development_words(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, "development words in product files:\n" + "\n".join(found)


def test_the_patterns_catch_logbook_lines_and_leave_product_vocabulary_alone() -> None:
    logbook = [
        "the sixteenth session's measured row",
        "Not run: this session's device time went to issue 17.",
        "the slot environment (slot_env.py, issue #20 part 3)",
        "70 of 250 in 8.8 min, then the machine was lost",
        "faster on 32% (the issue's target is 30%)",
        "the Docker image, which is not reachable here",
        "runs it on a lent GPU machine",
        "in the second round of work",
        "prints the throughput table (part 5).",
    ]
    product = [
        "each command runs in a session of its own (setsid)",
        '@pytest.fixture(scope="session")',
        "from agent.rl.session import KernelSession",
        "an HTTP session is reused across requests",
        "round up to the next multiple of 8",
        "coarse-to-fine: each tuning round narrows the space",
        "see the GitHub issues page to report a bug",
    ]
    assert all(development_words(line) for line in logbook), [
        line for line in logbook if not development_words(line)
    ]
    assert not any(development_words(line) for line in product), [
        line for line in product if development_words(line)
    ]
