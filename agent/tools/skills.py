"""Skills: `skills/<name>/SKILL.md` files the model reads. The main skill is in the system prompt;
the model lists and reads the others (and their assets, e.g. examples) on demand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.paths import skills_dir

from .base import ToolError, tool
from .context import ToolContext

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path

    @property
    def body(self) -> str:
        """SKILL.md without its front matter."""
        return split_front_matter((self.folder / SKILL_FILE).read_text(encoding="utf-8"))[1]


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(`key: value` pairs between leading `---` lines, the rest)."""
    if not text.startswith("---\n"):
        return {}, text
    head, sep, body = text[4:].partition("\n---\n")
    if not sep:
        return {}, text
    fields = {}
    for line in head.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields[key.strip()] = value.strip()
    return fields, body.lstrip("\n")


def skill_catalog(root: Path | None = None) -> dict[str, Skill]:
    root = root or skills_dir()
    catalog = {}
    for skill_md in sorted(root.glob(f"*/{SKILL_FILE}")):
        fields, _ = split_front_matter(skill_md.read_text(encoding="utf-8"))
        name = fields.get("name", skill_md.parent.name)
        catalog[name] = Skill(name=name, description=fields.get("description", ""), folder=skill_md.parent)
    return catalog


def catalog_lines(catalog: dict[str, Skill], main: str) -> str:
    return "\n".join(
        f"- {s.name}: {s.description}{' (in this prompt)' if s.name == main else ''}"
        for s in catalog.values()
    )


@tool
def list_skills(ctx: ToolContext) -> str:
    """List the skills (guides on CUDA workflow, optimization, debugging, tuning) you can read with
    read_skill, with the files each one holds."""
    lines = []
    for skill in skill_catalog().values():
        files = sorted(
            p.relative_to(skill.folder).as_posix()
            for p in skill.folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )
        lines.append(f"{skill.name}: {skill.description}\n  files: {', '.join(files)}")
    return "\n".join(lines)


@tool
def read_skill(ctx: ToolContext, name: str, path: str = SKILL_FILE) -> str:
    """Read a skill's SKILL.md, or another file of the skill such as an example kernel.

    Args:
        name: The skill's name, as list_skills shows it.
        path: A file inside the skill's folder; SKILL.md by default.
    """
    catalog = skill_catalog()
    skill = catalog.get(name)
    if skill is None:
        raise ToolError(f"no skill named {name!r}; the skills are: {', '.join(catalog)}")
    rel = PurePosixPath(path)
    if rel.is_absolute() or ".." in rel.parts:
        raise ToolError(f"{path}: give a path inside the skill's folder, e.g. {SKILL_FILE}")
    target = skill.folder / rel
    if not target.is_file():
        raise ToolError(f"{name} has no file {path}; list_skills shows its files")
    return target.read_text(encoding="utf-8", errors="replace")
