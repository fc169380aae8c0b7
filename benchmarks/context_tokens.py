"""Input tokens per model request of long scripted runs, with the context ceiling off and on.

    python benchmarks/context_tokens.py [--out benchmarks/results/context/context_tokens_cpu.md]

Two runs through `agent.run.solve.solve`, each twice (`context_tokens=0`: the whole history every
turn; then the default ceiling): 60 turns on KernelBench level 2's 76_Gemm_Add_ReLU and 100 turns on
level 3's 44_MiniGPTBlock. The model is scripted: every turn it reasons a few hundred characters and
then writes kernels of realistic size (a .cu of 7-16 kB, a binding, model_new.py), reads them back,
edits them, verifies, profiles, or reads the task. The referee is the tests' fake (no GPU, no
compiles): its verdict and profile texts have the real format, and the tokens depend on the text the
model reads and writes, not on whether the kernels are any good.

Tokens are agent.run.context's estimate (characters / 3 plus a few per message, over-counting the
providers' tokenizers) of exactly what the model was sent, tool schemas included. "New" tokens are
those after the longest message prefix a request shares with the previous one: what a provider's
prompt cache cannot serve. Targets: every request under the ceiling, total input at least 3x lower.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.budget import BudgetLimits  # noqa: E402
from agent.messages import AssistantMessage, Message, ToolCall  # noqa: E402
from agent.models.scripted import ScriptedModel  # noqa: E402
from agent.referee import EvalOptions  # noqa: E402
from agent.run.context import (  # noqa: E402
    DEFAULT_CHUNK_TURNS,
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_KEEP_TURNS,
    message_tokens,
    request_tokens,
)
from agent.run.solve import SolveConfig, solve  # noqa: E402
from agent.tasks import Task, load_task  # noqa: E402
from agent.transcripts.format import ContextElidedEvent  # noqa: E402
from agent.transcripts.reader import load_transcript  # noqa: E402
from tests.run.fakes import FakeReferee  # noqa: E402

KERNELBENCH = ROOT.parent / "shared" / "kernelbench"
RUNS = (("level2/76_Gemm_Add_ReLU.py", 60, 7_000, (4, 6)), ("level3/44_MiniGPTBlock.py", 100, 16_000, (4, 6)))
"""(task, turns, size of the main .cu file in characters, the keep-last-turns settings measured; the
first is the default)"""
CACHE_READ, CACHE_WRITE = 0.1, 1.25
"""Anthropic's prices of a cached and a newly cached input token, relative to a plain one."""


def cuda_file(revision: int, size: int) -> str:
    """A fused CUDA file of about `size` characters that differs in every revision."""
    head = (
        f"// revision {revision}: tiled GEMM with a fused epilogue\n#include <cuda_runtime.h>\n"
        "#include <cstdint>\n\nconstexpr int TM = 128, TN = 128, TK = 32;\n\n"
    )
    lines = [head]
    kernel = 0
    while sum(map(len, lines)) < size:
        lines.append(
            f"__global__ void __launch_bounds__(256) stage{kernel}_r{revision}(const float* __restrict__ a, "
            "const float* __restrict__ b, float* __restrict__ c, int m, int n, int k) {\n"
            "    __shared__ float as[TK][TM + 4];\n    __shared__ float bs[TK][TN + 4];\n"
            "    const int row = blockIdx.y * TM + threadIdx.y * 8, col = blockIdx.x * TN + threadIdx.x * 8;\n"
            "    float acc[8][8] = {};\n"
            "    for (int kk = 0; kk < k; kk += TK) {\n"
            + "".join(
                f"        as[threadIdx.x % TK][threadIdx.y * 8 + {j}] = a[(row + {j}) * k + kk + threadIdx.x % TK];\n"
                for j in range(8)
            )
            + "        __syncthreads();\n"
            "        #pragma unroll\n        for (int t = 0; t < TK; ++t)\n"
            "            for (int i = 0; i < 8; ++i)\n"
            f"                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(as[t][i], bs[t][j + {kernel % 4}], acc[i][j]);\n"
            "        __syncthreads();\n    }\n"
            "    for (int i = 0; i < 8; ++i)\n        for (int j = 0; j < 8; ++j)\n"
            "            c[(row + i) * n + col + j] = fmaxf(acc[i][j] + b[col + j], 0.0f);\n}\n\n"
        )
        kernel += 1
    lines.append(
        'extern "C" void launch_fused(const float* a, const float* b, float* c, int m, int n, int k, '
        "cudaStream_t stream) {\n    dim3 block(16, 16), grid((n + TN - 1) / TN, (m + TM - 1) / TM);\n"
        f"    stage0_r{revision}<<<grid, block, 0, stream>>>(a, b, c, m, n, k);\n}}\n"
    )
    return "".join(lines)


BINDING = (
    '#include "binding_registry.h"\n#include <torch/extension.h>\n\n'
    'extern "C" void launch_fused(const float*, const float*, float*, int, int, int, cudaStream_t);\n\n'
    "torch::Tensor fused_forward(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {\n"
    '    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");\n'
    "    auto out = torch::empty({x.size(0), w.size(0)}, x.options());\n"
    "    launch_fused(x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), x.size(0), "
    "w.size(0), x.size(1), at::cuda::getCurrentCUDAStream());\n    return out;\n}\n\n"
    'REGISTER_BINDING(fused_forward, "fused GEMM + bias + ReLU");\n'
)


def model_new(revision: int, speedup: float) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\nimport cuda_extension\n\n"
        f"# FAKE-SPEEDUP: {speedup:.2f}\n# revision {revision}\n\n"
        "class ModelNew(nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n"
        "        self.gemm = nn.Linear(args[0], args[1], bias=False)\n"
        "        self.bias = nn.Parameter(torch.randn(args[2]))\n\n"
        "    def forward(self, x):\n        return cuda_extension.fused_forward(x, self.gemm.weight, self.bias)\n"
    )


def script(turns: int, cu_size: int) -> list[AssistantMessage]:
    """Seven-turn cycles: write all three files, verify, read the kernel back, edit it, profile, read
    model_new.py, read the task; the speedup creeps up so the best changes now and then."""
    steps: list[AssistantMessage] = []
    for turn in range(1, turns + 1):
        revision, phase = divmod(turn - 1, 7)
        source = cuda_file(revision, cu_size)

        def call(name: str, arguments: dict, i: int = 0, turn: int = turn) -> ToolCall:
            return ToolCall.from_raw(id=f"t{turn}_{i}", name=name, raw_arguments=json.dumps(arguments))

        match phase:
            case 0:
                calls = [
                    call("write_file", {"path": "kernels/fused.cu", "content": source}, 0),
                    call("write_file", {"path": "kernels/fused_binding.cpp", "content": BINDING}, 1),
                    call(
                        "write_file",
                        {"path": "model_new.py", "content": model_new(revision, 1 + revision / 20)},
                        2,
                    ),
                ]
            case 1:
                calls = [call("verify", {})]
            case 2:
                calls = [call("read_file", {"path": "kernels/fused.cu"})]
            case 3:
                old = source.splitlines()[5]
                calls = [
                    call(
                        "edit_file", {"path": "kernels/fused.cu", "old_string": old, "new_string": old + " "}
                    )
                ]
            case 4:
                calls = [call("profile", {})]
            case 5:
                calls = [call("read_file", {"path": "model_new.py"})]
            case _:
                calls = [call("read_file", {"path": "reference.py"})]
        reasoning = (
            f"Turn {turn}. The profile says the GEMM main loop dominates; the epilogue is fused already. "
            "Next I try a wider tile in K and double-buffered shared memory loads, then re-check that "
            "the bias broadcast is read once per column block. " * 2
        )
        steps.append(AssistantMessage(text=reasoning, tool_calls=calls))
    return steps


@dataclass(frozen=True)
class Measured:
    requests: int
    max_tokens: int
    total_tokens: int
    new_tokens: int
    elisions: int
    status: str

    @property
    def cache_weighted(self) -> float:
        """Input tokens priced as with prompt caching: the shared prefix read, the rest written."""
        return CACHE_READ * (self.total_tokens - self.new_tokens) + CACHE_WRITE * self.new_tokens


def _new_tokens(previous: list[Message], current: list[Message]) -> int:
    shared = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        shared += 1
    return sum(message_tokens(m) for m in current[shared:])


def measure(
    task: Task, turns: int, cu_size: int, context_tokens: int, keep_turns: int, work: Path
) -> Measured:
    model = ScriptedModel(script(turns, cu_size), name="scripted")
    out = work / f"{task.name}-{context_tokens}-{keep_turns}"
    result = solve(
        SolveConfig(
            task=task.path,
            out=out,
            model="scripted",
            budget=BudgetLimits(turns=turns, usd=None, wall=None, gpu=None),
            referee=EvalOptions(arch="sm_90"),
            context_tokens=context_tokens,
            context_keep_turns=keep_turns,
        ),
        model=model,
        referee=FakeReferee(),
        task=task,
    )
    transcript = load_transcript(out / "transcript.jsonl")
    tools = transcript.header.tools
    sent = [call.messages for call in model.calls]
    sizes = [request_tokens(messages, tools) for messages in sent]
    new = sizes[0] + sum(_new_tokens(a, b) for a, b in itertools.pairwise(sent))
    return Measured(
        requests=len(sent),
        max_tokens=max(sizes),
        total_tokens=sum(sizes),
        new_tokens=new,
        elisions=len(transcript.of_type(ContextElidedEvent)),
        status=result.status,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/context/context_tokens_cpu.md")
    args = parser.parse_args()
    rows: list[str] = []
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for relative, turns, cu_size, keeps in RUNS:
            task = load_task(KERNELBENCH / relative)
            before = measure(task, turns, cu_size, 0, DEFAULT_KEEP_TURNS, Path(tmp))
            for keep in keeps:
                after = measure(task, turns, cu_size, DEFAULT_CONTEXT_TOKENS, keep, Path(tmp))
                ratio = before.total_tokens / after.total_tokens
                met = after.max_tokens <= DEFAULT_CONTEXT_TOKENS and ratio >= 3
                if keep == DEFAULT_KEEP_TURNS:
                    verdicts.append(f"{relative}: {'met' if met else 'not met'} ({ratio:.2f}x)")
                rows.append(
                    f"| {relative} | {turns} | {keep} | {before.max_tokens:,} | {after.max_tokens:,} | "
                    f"{before.total_tokens:,} | {after.total_tokens:,} | **{ratio:.2f}x** | "
                    f"{before.new_tokens:,} | {after.new_tokens:,} | "
                    f"{before.cache_weighted / after.cache_weighted:.2f}x | {after.elisions} | {after.status} |"
                )
                print(rows[-1], flush=True)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    table = "\n".join(
        [
            "# Input tokens per request: context ceiling off and on",
            "",
            f"- command: `python benchmarks/context_tokens.py` ({now})",
            f"- machine: {platform.node() or 'unknown'}, the 2-core CPU machine ({platform.processor() or platform.machine()}), "
            f"Python {platform.python_version()}; no GPU (the tests' fake referee)",
            f"- ceiling: {DEFAULT_CONTEXT_TOKENS:,} estimated tokens (the default); keep: the last turns never "
            f"folded (default {DEFAULT_KEEP_TURNS}); older turns folded into one digest line each, in chunks of {DEFAULT_CHUNK_TURNS}",
            "- tokens: characters / 3 plus a few per message, tool schemas included (agent/run/context.py)",
            "- new: tokens after the longest message prefix shared with the previous request (not cacheable); "
            f"cached off/on: the input priced as with prompt caching ({CACHE_READ}x read, {CACHE_WRITE}x written), "
            "off over on",
            "",
            "| run | turns | keep | max/request off | max/request on | total off | total on | total off/on | "
            "new off | new on | cached off/on | elisions | status |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            "Targets at the defaults (every request under the ceiling, total at least 3x lower): "
            + "; ".join(verdicts)
            + ".",
            "",
        ]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
