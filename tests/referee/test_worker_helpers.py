"""What the candidate and judge workers must compute identically: state randomization, seeded
inputs, checksums; and the output checks (structure, subclasses, aliasing)."""

from __future__ import annotations

import pytest
import torch

from sandbox.workers.referee import referee_common as rc

TASK = """
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.bn = nn.BatchNorm1d(dim)
        self.linear = nn.Linear(dim, dim)
    def forward(self, x):
        return self.linear(self.bn(self.norm(x)))
def get_inputs():
    return [torch.randn(8, 16), torch.randint(0, 5, (3,))]
def get_init_inputs():
    return [16]
"""


@pytest.fixture
def namespace() -> dict:
    return rc.load_task_module(TASK, "task.py")


def test_every_floating_parameter_and_buffer_moves_away_from_its_default(namespace: dict) -> None:
    model = rc.build_reference(namespace, [16], seed=1234, device="cpu")
    state = model.state_dict()
    assert not torch.allclose(state["norm.weight"], torch.ones(16))
    assert not torch.allclose(state["norm.bias"], torch.zeros(16))
    assert not torch.allclose(state["bn.running_mean"], torch.zeros(16))
    assert not torch.allclose(state["bn.running_var"], torch.ones(16))
    assert (state["bn.running_var"] >= 0).all(), "a variance must stay a variance"
    assert state["bn.num_batches_tracked"].dtype == torch.int64  # integers are left alone
    default_std = torch.nn.Linear(16, 16).weight.detach().std()
    assert 0.3 < float(state["linear.weight"].std() / default_std) < 3.0  # same spread as default init


def test_the_same_seed_rebuilds_the_same_state_and_another_does_not(namespace: dict) -> None:
    a = rc.build_reference(namespace, [16], seed=7, device="cpu").state_dict()
    b = rc.build_reference(namespace, [16], seed=7, device="cpu").state_dict()
    c = rc.build_reference(namespace, [16], seed=8, device="cpu").state_dict()
    assert rc.state_checksum(a) == rc.state_checksum(b)
    assert rc.state_checksum(a) != rc.state_checksum(c)


def test_seeded_inputs_are_reproducible_and_fresh_per_seed(namespace: dict) -> None:
    first = rc.seeded_call(namespace["get_inputs"], 99, "cpu")
    again = rc.seeded_call(namespace["get_inputs"], 99, "cpu")
    other = rc.seeded_call(namespace["get_inputs"], 100, "cpu")
    assert [rc.checksum(t) for t in first] == [rc.checksum(t) for t in again]
    assert rc.checksum(first[0]) != rc.checksum(other[0])


def test_checksum_sees_one_changed_element_and_a_permutation() -> None:
    x = torch.randn(1000)
    base = rc.checksum(x)
    changed = x.clone()
    changed[500] = changed[500] + 1e-6
    assert rc.checksum(changed) != base
    assert rc.checksum(x.flip(0)) != base
    assert rc.checksum(x.clone()) == base
    assert rc.checksum(torch.tensor([True, False])) != rc.checksum(torch.tensor([False, True]))


def test_same_bits_treats_equal_nans_as_equal() -> None:
    x = torch.tensor([1.0, float("nan")])
    assert rc.same_bits(x, x.clone())
    assert not rc.same_bits(x, torch.tensor([1.0, 2.0]))
    assert not rc.same_bits(x, x.double())


def test_aliasing_is_found_through_views_and_not_for_copies() -> None:
    x, other = torch.randn(4, 4), torch.randn(4, 4)
    assert rc.aliased_inputs(x[1:], [other, x]) == [1]
    assert rc.aliased_inputs(x.clone(), [other, x]) == []


def test_output_structure_and_leaves() -> None:
    class Sub(torch.Tensor):
        pass

    t = torch.ones(2)
    assert rc.flatten_outputs(t) == ("tensor", [t])
    structure, leaves = rc.flatten_outputs((t, [t, 3], None))
    assert structure == "tuple[tensor, list[tensor, int], none]" and len(leaves) == 4
    sub = t.as_subclass(Sub)
    assert rc.flatten_outputs(sub)[0] == "tensor"
    assert rc.describe_leaf(sub)["exact_tensor"] is False
    assert rc.describe_leaf(t) == {
        "type": "torch.Tensor",
        "exact_tensor": True,
        "shape": [2],
        "dtype": "float32",
        "device": "cpu",
    }
    assert rc.flatten_outputs({"a": t})[0] == "other:dict"


def test_errors_are_classified() -> None:
    assert (
        rc.classify_error(RuntimeError("CUDA error: an illegal memory access was encountered"))
        == "cuda_error"
    )
    assert rc.classify_error(torch.cuda.OutOfMemoryError("out of memory")) == "oom"
    assert rc.classify_error(SystemExit(0)) == "exit"
    assert rc.classify_error(ValueError("x")) == "exception"
    message, _ = rc.describe_error(SystemExit(3))
    assert message == "the candidate called exit(3)"


def test_a_task_without_its_names_is_refused() -> None:
    with pytest.raises(LookupError, match="get_init_inputs"):
        rc.load_task_module("class Model: pass\ndef get_inputs(): return []\n", "bad.py")
