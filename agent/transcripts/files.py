"""The model's files as a transcript implies them: every successful write_file and edit_file call
replayed on an empty workspace, so a viewer can show diffs and replay can rebuild a judged state
without the output folder."""

from __future__ import annotations

import difflib
from pathlib import PurePosixPath

from pydantic import BaseModel

from agent.transcripts.format import EvaluationEvent, ToolCallEvent, ToolResultEvent, Transcript
from agent.workspace import content_hash

FILE_TOOLS = ("write_file", "edit_file")


class FileEdit(BaseModel):
    turn: int
    call_id: str
    tool: str
    path: str
    before: str | None
    after: str

    def diff(self, context: int = 3) -> str:
        before = (self.before or "").splitlines(keepends=True)
        after = self.after.splitlines(keepends=True)
        old = f"a/{self.path}" if self.before is not None else "/dev/null"
        lines = difflib.unified_diff(before, after, old, f"b/{self.path}", n=context)
        return "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        )


class FileHistory(BaseModel):
    edits: list[FileEdit]
    judged: dict[str, dict[str, str]]
    """content hash -> the model files at an evaluation with that hash (only where the rebuild matches)."""

    def edit_for(self, call_id: str, turn: int) -> FileEdit | None:
        return next((e for e in self.edits if e.call_id == call_id and e.turn == turn), None)


def normalize(path: str) -> str:
    parts = [p for p in PurePosixPath(path.strip()).parts if p != "."]
    return PurePosixPath(*parts).as_posix() if parts else "."


def file_history(transcript: Transcript) -> FileHistory:
    files: dict[str, str] = {}
    calls: dict[tuple[int, str], ToolCallEvent] = {}
    edits: list[FileEdit] = []
    judged: dict[str, dict[str, str]] = {}
    for event in transcript.events:
        if isinstance(event, ToolCallEvent) and event.call.name in FILE_TOOLS:
            calls[(event.turn, event.call.id)] = event
        elif isinstance(event, ToolResultEvent) and not event.is_error:
            call = calls.pop((event.turn, event.tool_call_id), None)
            if call is not None and (edit := _apply(files, call)) is not None:
                edits.append(edit)
        elif isinstance(event, EvaluationEvent) and content_hash(files) == event.content_hash:
            judged[event.content_hash] = dict(files)
    return FileHistory(edits=edits, judged=judged)


def _apply(files: dict[str, str], event: ToolCallEvent) -> FileEdit | None:
    args = event.call.arguments or {}
    path = args.get("path")
    if not isinstance(path, str):
        return None
    path = normalize(path)
    before = files.get(path)
    if event.call.name == "write_file" and isinstance(args.get("content"), str):
        after = args["content"]
    elif event.call.name == "edit_file" and before is not None:
        old, new = args.get("old_string"), args.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str) or old not in before:
            return None
        after = before.replace(old, new, 1)
    else:
        return None
    files[path] = after
    return FileEdit(
        turn=event.turn, call_id=event.call.id, tool=event.call.name, path=path, before=before, after=after
    )
