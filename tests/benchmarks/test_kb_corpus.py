"""benchmarks/kb_corpus.py: one KernelBench single-file solution per level 1-3 task, shaped as LLMs
write them, paired with its task by `agent batch`, correct when built the way the referee builds it
(checked on the CPU with the CUDA kernel replaced by a copy), and really compiling (one, slow)."""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.utils.cpp_extension

from agent.batch.layouts import discover_solutions
from agent.tasks import parse_task
from benchmarks import kb_corpus
from sandbox.workers.referee import referee_common as rc

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = REPO.parent / "shared" / "kernelbench"
if not KERNELBENCH.is_dir():
    KERNELBENCH = Path("/work/shared/kernelbench")
LEVELS = [1, 2, 3]

pytestmark = pytest.mark.skipif(
    not (KERNELBENCH / "level1").is_dir(), reason=f"KernelBench tasks not found under {KERNELBENCH}"
)


def task_paths() -> list[Path]:
    return [p for level in LEVELS for p in kb_corpus.task_files(KERNELBENCH, level)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kb-corpus")
    assert (
        kb_corpus.main(["--kernelbench", str(KERNELBENCH), "--levels", "1", "2", "3", "--out", str(out)]) == 0
    )
    return out


def module_strings(tree: ast.Module) -> dict[str, str]:
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def load_inline_call(tree: ast.Module) -> dict[str, Any]:
    calls = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", "") == "load_inline"
    ]
    assert len(calls) == 1
    return {kw.arg: ast.literal_eval(kw.value) if isinstance(kw.value, ast.Constant | ast.List) else kw.value.id
            for kw in calls[0].keywords}  # fmt: skip


def test_every_task_gets_one_solution_in_kernelbench_style(corpus: Path) -> None:
    files = sorted(corpus.glob("level_*_problem_*_sample_0_kernel.py"))
    assert len(files) >= 250 and len(files) == len(task_paths())
    extensions, kernels = set(), set()
    for path in files:
        text = path.read_text()
        tree = ast.parse(text)
        assert "import torch\n" in text and "from torch.utils.cpp_extension import load_inline\n" in text
        strings = module_strings(tree)
        cuda, cpp = strings["cuda_source"], strings["cpp_source"]
        assert cuda.startswith("#include <torch/extension.h>\n"), path.name
        call = load_inline_call(tree)
        assert call["cpp_sources"] == "cpp_source" and call["cuda_sources"] == "cuda_source"
        assert call["verbose"] is False and call["extra_cuda_cflags"] == ["-O3"]
        (launcher,) = call["functions"]
        assert (
            f"torch::Tensor {launcher}(torch::Tensor x) {{" in cuda and f"{launcher}(torch::Tensor x);" in cpp
        )
        assert "<<<" in cuda and "C10_CUDA_KERNEL_LAUNCH_CHECK" in cuda
        kernel = cuda.split("__global__ void ", 1)[1].split("(", 1)[0]
        assert call["name"] not in extensions and kernel not in kernels, path.name
        extensions.add(call["name"])
        kernels.add(kernel)
        new = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
        assert len(new) == 1 and ast.unparse(new[0].bases[0]) == "nn.Module", path.name
        assert any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in new[0].body)
    manifest = json.loads((corpus / "kb_corpus.json").read_text())
    assert not manifest["not_generated"]
    assert {s["style"] for s in manifest["solutions"]} == set(kb_corpus.STYLES)


def test_agent_batch_pairs_every_solution_with_its_task(corpus: Path) -> None:
    tasks = [parse_task(p) for p in task_paths()]
    found = discover_solutions(corpus, tasks)
    assert not found.unmatched
    assert len(found.items) == len(tasks)
    manifest = {
        s["file"]: s["task"] for s in json.loads((corpus / "kb_corpus.json").read_text())["solutions"]
    }
    for item in found.items:
        assert item.source is not None and item.candidate == "sample_0"
        assert manifest[item.source.name] == f"level{item.task.level}/{item.task.path.name}"


def test_shared_source_and_copy_style(tmp_path: Path) -> None:
    shared, plain = tmp_path / "shared", tmp_path / "copy"
    kb_corpus.generate(KERNELBENCH, [1, 2], shared, shared=True)
    kb_corpus.generate(KERNELBENCH, [1], plain, style="copy")
    texts = [ast.parse(p.read_text()) for p in sorted(shared.glob("level_*.py"))]
    assert len({module_strings(t)["cuda_source"] for t in texts}) == 1
    assert len({module_strings(t)["cpp_source"] for t in texts}) == 1
    assert len({load_inline_call(t)["name"] for t in texts}) == 1
    styles = {s["style"] for s in json.loads((plain / "kb_corpus.json").read_text())["solutions"]}
    assert styles == {"grid_stride"}


def test_a_task_it_cannot_use_is_named_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    level = tmp_path / "kb" / "level1"
    level.mkdir(parents=True)
    (level / "1_Good.py").write_text((KERNELBENCH / "level1" / "19_ReLU.py").read_text())
    (level / "2_NoModel.py").write_text("def get_inputs():\n    return []\n")
    (level / "Unnumbered.py").write_text("x = 1\n")
    assert (
        kb_corpus.main(["--kernelbench", str(tmp_path / "kb"), "--levels", "1", "--out", str(tmp_path / "o")])
        == 1
    )
    out = capsys.readouterr().out
    assert "level1: 1/3 solutions" in out
    assert "2_NoModel.py: defines no Model, get_init_inputs" in out
    assert "Unnumbered.py: no problem id" in out


def test_the_generator_needs_only_the_standard_library() -> None:
    tree = ast.parse(Path(kb_corpus.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


# -- ModelNew built as the referee builds it (CPU, the CUDA kernel replaced by a copy) -------------
SMALL = {
    "level1/19_ReLU.py": {"batch_size": 4, "dim": 33},
    "level1/51_Argmax_over_a_dimension.py": {"batch_size": 3, "dim1": 5, "dim2": 7},
    "level2/33_Gemm_Scale_BatchNorm.py": {
        "batch_size": 8,
        "in_features": 16,
        "out_features": 12,
        "scale_shape": (12,),
    },
    "level3/8_ResNetBasicBlock.py": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "stride": 2},
}


def import_solution(path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> types.ModuleType:
    """The solution imported as the candidate worker imports it, load_inline answered by a fake whose
    functions copy the tensor as the CUDA kernel does (a fresh contiguous tensor, same bits)."""

    def fake_load_inline(**kwargs: Any) -> types.SimpleNamespace:
        assert kwargs["cuda_sources"].startswith("#include <torch/extension.h>")
        assert kwargs["verbose"] is False and kwargs["extra_cuda_cflags"] == ["-O3"]

        def launcher(name: str) -> Any:
            def run(x: torch.Tensor) -> torch.Tensor:
                calls.append(name)
                return x.contiguous().clone()

            return run

        return types.SimpleNamespace(**{f: launcher(f) for f in kwargs["functions"]})

    monkeypatch.setattr(torch.utils.cpp_extension, "load_inline", fake_load_inline)
    spec = importlib.util.spec_from_file_location(f"kb_solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task_name", list(SMALL))
def test_model_new_matches_model_when_built_like_the_referee(
    task_name: str, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    level, file_name = task_name.split("/")
    task = KERNELBENCH / level / file_name
    _, problem_id = kb_corpus.level_and_id(task)
    assert problem_id is not None
    calls: list[str] = []
    solution = import_solution(corpus / kb_corpus.output_name(int(level[5:]), problem_id), monkeypatch, calls)
    vars(solution).update(SMALL[task_name])
    namespace: dict[str, Any] = {"__name__": "kb_task"}
    exec(compile(task.read_text(), str(task), "exec"), namespace)
    namespace.update(SMALL[task_name])

    # sandbox/workers/referee/candidate_child.py: reference state from the seeds, ModelNew(*init_args), load_state_dict
    init_args = rc.seeded_call(namespace["get_init_inputs"], 11, "cpu")
    reference = rc.build_reference(namespace, init_args, 12, "cpu")
    state = {name: t.detach().clone() for name, t in reference.state_dict().items()}
    with torch.device("cpu"):
        model = solution.ModelNew(*copy.deepcopy(init_args))
    model = model.to("cpu")
    loaded = model.load_state_dict(state, strict=False)
    assert not loaded.missing_keys and not loaded.unexpected_keys
    assert list(model.state_dict()) == list(state)

    for seed in (21, 22):
        expected_inputs = rc.seeded_call(namespace["get_inputs"], seed, "cpu")
        inputs = rc.seeded_call(namespace["get_inputs"], seed, "cpu")
        with torch.no_grad():
            expected = reference(*expected_inputs)
            actual = model(*inputs)
        assert type(actual) is type(expected) is torch.Tensor
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert torch.equal(actual, expected), task_name
    assert len(calls) == 2  # the launcher ran on every output


# -- one real build ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_one_generated_solution_compiles_for_real(tmp_path: Path) -> None:
    from agent.build.compile import compile_solution
    from agent.workspace import SingleFileSolution
    from sandbox.base import open_sandbox

    out = tmp_path / "corpus"
    kb_corpus.generate(KERNELBENCH, [1], out)
    target = tmp_path / "solution" / kb_corpus.output_name(1, 19)  # the vec4 style under `mixed`
    target.parent.mkdir()
    target.write_text((out / target.name).read_text())
    assert 'name="kb_l1_p19_vec4"' in target.read_text()
    solution = SingleFileSolution(target)
    box = open_sandbox("local", workspace=solution.root, cache_dir=tmp_path / "cache")
    result = compile_solution(solution, box, arch="sm_90")
    assert result.ok, result.feedback()
    assert list((tmp_path / "cache").rglob("kb_l1_p19_vec4/kb_l1_p19_vec4*.so")), "no extension was built"
