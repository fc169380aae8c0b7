"""Reading transcripts of every format version: `load_transcript` is what replay, show and export use.

`read_transcript` reads the current version strictly. An older file is read line by
line, each line's JSON is lifted one version at a time by `UPGRADES`, then validated with the
current models. When the format goes to version N+1, add one function `_upgrade_vN(line) -> line`
that rewrites a version-N line (header or event) into version N+1, register it under N, and commit
a version-N file under tests/transcripts/data/.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.transcripts.compact import COMPACTION, CompactionError, Expander
from agent.transcripts.format import (
    EVENT_ADAPTER,
    FORMAT,
    VERSION,
    Event,
    Header,
    Transcript,
    TranscriptError,
)

Line = dict[str, Any]
Upgrade = Callable[[Line], Line]

UPGRADES: dict[int, Upgrade] = {}
"""from-version -> a function turning one line of that version into one line of the next version."""


def file_version(path: Path) -> int:
    """The format version a transcript's header declares (TranscriptError when there is none)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            first = handle.readline()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = json.loads(first)
    except ValueError:
        raise TranscriptError(f"{path}:1: the header is not JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TranscriptError(f"{path}:1: not a kernel-agent transcript (no format {FORMAT!r} header)")
    version = data.get("version")
    if not isinstance(version, int):
        raise TranscriptError(f"{path}:1: the header has no integer version")
    return version


def load_transcript(
    path: Path, *, upgrades: Mapping[int, Upgrade] = UPGRADES, current: int = VERSION
) -> Transcript:
    """Read a transcript of any known version as the current models."""
    path = Path(path)
    version = file_version(path)
    if version == current:
        return read_transcript(path)
    if version > current:
        raise TranscriptError(
            f"{path}:1: format version {version} is newer than this kernel-agent reads ({current}); upgrade it"
        )
    missing = [v for v in range(version, current) if v not in upgrades]
    if missing:
        raise TranscriptError(
            f"{path}:1: no reader for format version {missing[0]} (this one reads {current})"
        )
    lines, truncated = _json_lines(path)
    upgraded = [(number, upgrade_line(line, version, current, upgrades)) for number, line in lines]
    return _validate(path, upgraded, truncated)


def upgrade_line(line: Line, version: int, current: int, upgrades: Mapping[int, Upgrade]) -> Line:
    for step in range(version, current):
        line = upgrades[step](line)
    if line.get("type") == "header":
        line = {**line, "version": current}
    return line


def _complete_lines(raw: bytes) -> tuple[list[bytes], bool]:
    """The lines of a file, and whether its last line was cut off mid-write (then it is dropped)."""
    lines = raw.split(b"\n")
    cut = lines.pop()  # b"" when the file ends with a newline, else the unfinished last line
    if not cut.strip():
        return lines, False
    try:
        json.loads(cut)
    except ValueError:
        return lines, True
    return [*lines, cut], False


def _json_lines(path: Path) -> tuple[list[tuple[int, Line]], bool]:
    """(line number, parsed JSON) of every non-empty line; a last line cut off mid-write is dropped."""
    raw, truncated = _complete_lines(path.read_bytes())
    parsed: list[tuple[int, Line]] = []
    for number, text in enumerate(raw, start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise TranscriptError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise TranscriptError(f"{path}:{number}: not a JSON object")
        parsed.append((number, value))
    return parsed, truncated


def _validate(path: Path, lines: list[tuple[int, Line]], truncated: bool) -> Transcript:
    if not lines:
        raise TranscriptError(f"{path}: empty; a transcript starts with its header line")
    try:
        header = Header.model_validate(_without_compaction_default(lines[0][1]))
    except ValidationError as exc:
        raise TranscriptError(
            f"{path}:1: not a valid header after upgrading: {exc.errors()[0]['msg']}"
        ) from None
    events: list[Event] = []
    for number, line in lines[1:]:
        try:
            events.append(EVENT_ADAPTER.validate_python(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise TranscriptError(
                f"{path}:{number}: not a valid event after upgrading: {where}: {first['msg']}"
            ) from None
    return Transcript(path=path, header=header, events=events, truncated=truncated)


def read_transcript(path: Path) -> Transcript:
    """Read and validate a transcript. A last line cut off mid-write is dropped and `truncated` set;
    any other bad line raises TranscriptError naming the line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read ({exc.strerror})") from None
    lines, truncated = _complete_lines(raw)
    if not lines or not lines[0].strip():
        raise TranscriptError(f"{path}: empty; a transcript starts with its header line")
    header = _parse_header(path, lines[0])
    expander = _expander(path, header)
    events: list[Event] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            if expander is None:
                events.append(EVENT_ADAPTER.validate_json(line))
            else:
                events.append(EVENT_ADAPTER.validate_python(expander.event(_json_object(line))))
        except ValidationError as exc:
            raise TranscriptError(f"{path}:{number}: not a valid event: {_first_error(exc)}") from None
        except (CompactionError, ValueError) as exc:
            raise TranscriptError(f"{path}:{number}: not a valid event: {exc}") from None
    return Transcript(path=path, header=header, events=events, truncated=truncated)


def _without_compaction_default(header: Line) -> Line:
    """A header line without `compaction` is a file written whole (before compaction existed)."""
    return header if "compaction" in header else {**header, "compaction": None}


def _expander(path: Path, header: Header) -> Expander | None:
    """What turns the file's compact events back into whole ones; None for a file written whole."""
    if header.compaction is None:
        return None
    if header.compaction != COMPACTION:
        raise TranscriptError(
            f"{path}:1: compaction {header.compaction!r} is newer than this kernel-agent reads; upgrade it"
        )
    return Expander()


def _json_object(line: bytes) -> dict[str, Any]:
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _parse_header(path: Path, line: bytes) -> Header:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise TranscriptError(f"{path}:1: the header is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TranscriptError(f"{path}:1: not a kernel-agent transcript (no format {FORMAT!r} header)")
    if data.get("version") != VERSION:
        raise TranscriptError(
            f"{path}:1: transcript format version {data.get('version')!r}; this reader knows version {VERSION}"
        )
    try:
        return Header.model_validate(_without_compaction_default(data))
    except ValidationError as exc:
        raise TranscriptError(f"{path}:1: not a valid header: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "line"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
