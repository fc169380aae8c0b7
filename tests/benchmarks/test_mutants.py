"""The mutation generator: every fault class finds sites in the verified corpus, changes exactly one
line of device code, and produces code that real nvcc compiles."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.mutants.generate import (
    TEMPLATE_KERNELS,
    corpus_mutants,
    correct_solutions,
    device_lines,
    mutate_source,
    sample,
)
from benchmarks.mutants.nvcc import compile_mutant
from benchmarks.mutants.operators import FAULT_CLASSES, HEADERS

KERNEL = """// y = relu(x * w + bias) over n elements; comment: a + b < c [i]
#include <cuda_runtime.h>
__device__ float square(float v) { return v * v; }
__global__ void k(const float* x, const float* w, const float* bias, float* y, int n) {
  __shared__ float tile[256];
  float acc = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    tile[threadIdx.x] = x[i];
    __syncthreads();
    acc += expf(tile[threadIdx.x]);
    y[i] = fmaxf(x[i] * w[i] + bias[i], 0.f);
  }
}
void host_side(int n) { int m = n + 1; (void)m; }
"""


@pytest.fixture(scope="module")
def corpus() -> list:
    return list(corpus_mutants(correct_solutions()))


def test_every_class_has_mutants_in_the_verified_solutions(corpus: list) -> None:
    counts = {c: sum(m.fault_class == c for m in corpus) for c in FAULT_CLASSES}
    assert all(n > 0 for n in counts.values()), counts


def test_template_kernels_are_mutated_too() -> None:
    classes = {m.fault_class for m in corpus_mutants([TEMPLATE_KERNELS])}
    assert {"arithmetic_swap", "wrong_index", "removed_sync", "off_by_one"} <= classes


def test_a_mutant_changes_one_device_line_and_never_comments_or_host_code() -> None:
    mutants = mutate_source(KERNEL, "k.cu")
    original = KERNEL.split("\n")
    inside = device_lines(KERNEL)
    assert {m.fault_class for m in mutants} == set(FAULT_CLASSES)
    for mutant in mutants:
        text = mutant.text.removeprefix(HEADERS.get(mutant.fault_class, ""))
        changed = [i for i, (a, b) in enumerate(zip(original, text.split("\n"), strict=True)) if a != b]
        assert changed == [mutant.line - 1], mutant.key
        assert mutant.line - 1 in inside and mutant.line not in (1, 14)


def test_each_class_rewrites_what_it_names() -> None:
    afters = {(m.fault_class, m.after) for m in mutate_source(KERNEL, "k.cu")}
    assert ("removed_sync", ";") in afters
    assert (
        "reduced_precision",
        "acc = __half2float(__float2half(acc + (expf(tile[threadIdx.x]))));",
    ) in afters
    assert ("reduced_precision", "acc += __expf(tile[threadIdx.x]);") in afters
    assert ("dropped_epilogue", "y[i] = fmaxf(x[i] * w[i], 0.f);") in afters
    assert ("dropped_epilogue", "y[i] = (x[i] * w[i] + bias[i]);") in afters
    assert any(c == "skipped_tail" and "i + 32 < n;" in a for c, a in afters)
    assert any(c == "off_by_one" and "i <= n;" in a for c, a in afters)
    assert ("wrong_index", "tile[(threadIdx.x) ^ 1] = x[i];") in afters
    assert ("arithmetic_swap", "y[i] = fmaxf(x[i] + w[i] + bias[i], 0.f);") in afters


def test_sampling_is_seeded_and_unknown_classes_are_refused(corpus: list) -> None:
    assert [m.key for m in sample(corpus, 2, seed=3)] == [m.key for m in sample(corpus, 2, seed=3)]
    assert len(sample(corpus, 2, seed=3)) == 2 * len(FAULT_CLASSES)
    with pytest.raises(ValueError, match="unknown fault class 'bitflip'"):
        mutate_source(KERNEL, "k.cu", ["bitflip"])


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not __import__("os").path.exists("/usr/local/cuda/bin/nvcc"),
    reason="needs nvcc",
)
@pytest.mark.parametrize("fault_class", FAULT_CLASSES)
def test_a_sample_of_each_class_compiles_with_nvcc(corpus: list, fault_class: str) -> None:
    (mutant,) = sample([m for m in corpus if m.fault_class == fault_class], 1, seed=0)
    outcome = compile_mutant(mutant)
    assert outcome.ok, f"{mutant.key}: {outcome.first_error}"


def test_the_benchmark_rate_leaves_stillborn_and_unjudged_mutants_out() -> None:
    from benchmarks.mutation_bench import summary_table

    rows = [
        {"class": "removed_sync", "outcome": "killed"},
        {"class": "removed_sync", "outcome": "survived"},
        {"class": "removed_sync", "outcome": "stillborn"},
        {"class": "wrong_index", "outcome": "killed"},
        {"class": "wrong_index", "outcome": "unjudged"},  # no GPU, or the referee's own error: no kill
    ]
    table, rates = summary_table(rows)
    assert rates["removed_sync"] == 0.5 and rates["wrong_index"] == 1.0
    assert rates["all"] == 2 / 3
    assert "| removed_sync | 3 | 1 | 0 | 1 | 1 | 50.0% |" in table
    assert "| wrong_index | 2 | 0 | 1 | 1 | 0 | 100.0% |" in table


TEMPLATE_CLASSES = [c for c in FAULT_CLASSES if c != "reduced_precision"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list:
    from benchmarks.mutation_bench import template_subjects

    return template_subjects(tmp_path_factory.mktemp("rendered"), only="")


@pytest.mark.slow  # rendering the corpus's 13 tasks traces each: about a minute on 2 cores
def test_the_template_policys_rendered_kernels_are_mutated_in_every_class(rendered: list) -> None:
    """The benchmark mutates the template policy's kernels as rendered for the corpus's tasks (the
    stage files, with the task's slots filled), besides the corpus's solutions."""
    assert {s.origin for s in rendered} == {"templates"}
    # the rendered kernels call no libm function and keep no float accumulator of the `s += t` kind
    # (reduce_acc.cuh's helpers): reduced_precision's sites are the corpus's
    assert {s.mutant.fault_class for s in rendered} == set(TEMPLATE_CLASSES)
    assert {s.task.stem for s in rendered} >= {"19_ReLU", "1_Square_matmul", "23_Softmax", "40_LayerNorm"}
    for subject in rendered[:50]:
        assert (subject.solution / subject.source).read_text() != subject.mutant.text
        assert subject.mutant.file.startswith("templates/") and subject.source.name.startswith("s")


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("nvcc") is None and not __import__("os").path.exists("/usr/local/cuda/bin/nvcc"),
    reason="needs nvcc",
)
@pytest.mark.parametrize("fault_class", TEMPLATE_CLASSES)
def test_a_sample_of_each_class_of_rendered_template_mutants_compiles(
    rendered: list, fault_class: str
) -> None:
    from benchmarks.mutation_bench import _sampled

    (subject,) = _sampled([s for s in rendered if s.mutant.fault_class == fault_class], 1, seed=0)
    outcome = compile_mutant(subject.mutant, folder=(subject.solution / subject.source).parent)
    assert outcome.ok, f"{subject.mutant.key}: {outcome.first_error}"
