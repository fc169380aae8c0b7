"""One home per concept: a class, protocol or function that names a concept is defined
once in agent/, and the others import it. Grepping the source keeps a second definition from
creeping back under the same name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[1] / "agent"

ONE_DEFINITION = [
    r"^class BudgetUsage\b",
    r"^class BudgetLimits\b",
    r"^class Evaluator\b",
    r"^Evaluator\s*=",
    r"^class Referee\b",
    r"^def materialize\b",
    r"^class TaskRef\b",
    r"^def task_identity\b",
    r"^class AttemptRecord\b",
    r"^class SolveResult\b",
    r"^def parse_budget_spec\b",
    r"^def parse_duration\b",
]


def sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(AGENT.rglob("*.py"))}


@pytest.mark.parametrize("pattern", ONE_DEFINITION)
def test_each_concept_is_defined_at_most_once(pattern: str) -> None:
    found = [
        f"{path.relative_to(AGENT.parent)}:{text.count(chr(10), 0, m.start()) + 1}"
        for path, text in sources().items()
        for m in re.finditer(pattern, text, re.MULTILINE)
    ]
    assert len(found) <= 1, f"{pattern!r} is defined more than once: {found}"


def test_no_second_outcome_type_in_the_batch() -> None:
    """An attempt is a SolveResult (agent run), then an AttemptRecord (store), then a report row."""
    for path, text in sources().items():
        for name in ("SolveOutcome", "AttemptOutcome"):
            assert f"class {name}" not in text, f"{path}: {name} is back; use AttemptRecord"


def test_only_agent_gpus_asks_what_the_gpus_are() -> None:
    """nvidia-smi and torch's device properties are read in agent/gpus.py; the rest asks it."""
    asking = re.compile(r"""["']nvidia-smi["']|get_device_properties\(""")
    found = [
        str(path.relative_to(AGENT.parent))
        for path, text in sources().items()
        if path.name != "gpus.py" and asking.search(text)
    ]
    assert not found, f"GPU facts read outside agent/gpus.py: {found}"


def test_the_template_policys_model_name_is_written_once() -> None:
    """`--model templates` names the built-in policy: agent.models.registry.TEMPLATES_MODEL."""
    found = [
        str(path.relative_to(AGENT.parent))
        for path, text in sources().items()
        if re.search(r"""(name|MODEL)\s*(:\s*str)?\s*=\s*["']templates["']""", text)
    ]
    assert found == ["agent/models/registry.py"], found
