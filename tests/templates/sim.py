"""A simulated tool environment for TemplatePolicy: it answers the policy's calls with the texts
the real tools return (agent/tools/files.py, pipeline.py, agent/referee/report.py), times each
candidate with a made-up cost model of its slot values, and fails the ones a test says."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.messages import Message, SystemMessage, ToolResultMessage, UserMessage
from agent.templates import TemplatePolicy
from agent.tools import Toolbox, default_tools
from agent.tools.pipeline import DRY_RUN_NOTE
from agent.workspace import content_hash

TOOLS = Toolbox(default_tools()).specs
_DEFINE = re.compile(r"#define (S\d+_[A-Z_]+) (-?\d+)")


def config_of(files: dict[str, str]) -> dict[str, int]:
    """The slot values the files compile with: tune_config.h wins over each .cu's fallbacks."""
    values: dict[str, int] = {}
    for path, text in files.items():
        if path.endswith(".cu"):
            values.update({k: int(v) for k, v in _DEFINE.findall(text)})
    values.update({k: int(v) for k, v in _DEFINE.findall(files.get("kernels/tune_config.h", ""))})
    return values


@dataclass
class Env:
    time_ms: Callable[[dict[str, int]], float]
    fails: Callable[[dict[str, int]], str | None] = lambda config: None
    gpu: bool = True
    turns: int = 40
    files: dict[str, str] = field(default_factory=dict)
    judged: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    submitted: dict[str, int] | None = None
    turn_log: list[list[str]] = field(default_factory=list)

    def run(self, policy: TemplatePolicy) -> list[Message]:
        messages: list[Message] = [SystemMessage(text="system"), UserMessage(text="task")]
        for turn in range(1, self.turns + 1):
            response = policy.query(messages, TOOLS)
            assert response.usage.prompt_tokens == 0 and response.cost_usd == 0.0
            message = response.message
            messages.append(message)
            self.turn_log.append([c.name for c in message.tool_calls])
            if not message.tool_calls:
                messages.append(UserMessage(text="You replied without calling a tool."))
                continue
            results = [self._answer(c.id, c.name, c.arguments or {}) for c in message.tool_calls]
            left = f"\n\n[budget left: turns {self.turns - turn}/{self.turns} · gpu 10m/15m]"
            results[-1] = results[-1].model_copy(update={"content": results[-1].content + left})
            messages.extend(results)
            if self.submitted is not None:
                break
        return messages

    def _answer(self, call_id: str, name: str, args: dict) -> ToolResultMessage:
        text, error = self._tool(name, args)
        return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=text, is_error=error)

    def _tool(self, name: str, args: dict) -> tuple[str, bool]:
        config = config_of(self.files)
        failure = self.fails(config)
        if name == "write_file":
            self.files[args["path"]] = args["content"]
            return f"created {args['path']}", False
        if name == "compile":
            if failure:
                return f"compile failed (compile_error): {failure}\nkernels/s0.cu:1:1: error: {failure}", True
            return "compiled in 1.0s for sm_90", False
        if name in ("verify", "profile", "submit"):
            if not self.gpu:
                return f"compiled in 1.0s for sm_90\n{DRY_RUN_NOTE}", name != "submit"
            if failure:
                return f"VERDICT: compile_error - {failure}", True
            self.judged.append((content_hash(self.files), config))
            ms = self.time_ms(config)
            verdict = "VERDICT: correct - matches the reference on 5 trials"
            if name == "submit":
                self.submitted = config
                return "submission accepted", False
            if name == "verify":
                return verdict, False
            return (
                f"{verdict}\ntime: yours {ms:.4g} ms (IQR {ms * 0.004:.2g}, n=100) | eager 1 ms (IQR 0.01, n=100)",
                False,
            )
        if name == "tune":
            return "tuned", False
        raise AssertionError(f"unexpected tool {name}")
