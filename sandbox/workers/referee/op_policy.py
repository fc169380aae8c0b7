"""Which torch operators a candidate may call, and the dispatch mode that sees them (stdlib; torch
imported only by `OpRecorder`).

`strict` follows CUDA-Agent's rules: ModelNew.forward and the extension do no compute through
torch. Allocation, views, shape queries and layout copies (on one device: a copy to or from
the host is offloading) are allowed; everything else that
reaches the dispatcher is a violation, whether it came from Python or from the extension's C++
(a TorchDispatchMode sees both). cuBLAS and cuDNN called by the extension's own C++ launch no
torch operator, so they are allowed. `kernelbench` allows torch glue and only reports it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

POLICIES = ("strict", "kernelbench")
FORWARD_LABEL = "kernel_agent.candidate_forward"  # record_function label around each candidate call


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


ALLOCATION = _names(
    "empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like "
    "new_zeros ones ones_like new_ones full full_like new_full scalar_tensor fill_ zero_ resize_ "
    "resize_as_ set_ lift_fresh lift_fresh_copy record_stream"
)
VIEWS = _names(
    "view _unsafe_view view_as reshape _reshape_alias as_strided as_strided_ t transpose permute "
    "expand expand_as squeeze unsqueeze flatten unflatten select slice narrow split "
    "split_with_sizes chunk unbind alias detach diagonal unfold movedim swapaxes swapdims real "
    "imag view_as_real view_as_complex _conj conj resolve_conj resolve_neg contiguous mT mH "
    "numpy_T"
)
LAYOUT_COPIES = _names("clone copy_ _copy_from _copy_from_and_resize")
QUERIES = _names(
    "size stride sym_size sym_stride sym_numel sym_storage_offset numel dim is_contiguous "
    "is_same_size is_pinned is_floating_point is_complex is_nonzero _local_scalar_dense item "
    "result_type _has_compatible_shallow_copy_type to type_as"
)
STRICT_ALLOWED = ALLOCATION | VIEWS | LAYOUT_COPIES | QUERIES
UNINITIALIZED = _names("empty empty_like empty_strided empty_permuted new_empty new_empty_strided")
TORCH_NAMESPACES = _names(
    "aten prims prim _c10d_functional c10d inductor quantized quantized_decomposed _quantized "
    "higher_order mkldnn fbgemm torchvision torchaudio xformers flash_attn triton"
)  # operators of torch and of libraries; any other namespace is one the candidate registered


def op_key(name: str) -> tuple[str, str]:
    """('aten', 'relu') from 'aten.relu.default', 'aten::relu' or 'aten::relu.out'."""
    if "::" in name:
        namespace, rest = name.split("::", 1)
    else:
        namespace, _, rest = name.partition(".")
    return namespace, rest.split(".", 1)[0]


def is_torch_op(name: str) -> bool:
    return op_key(name)[0] in TORCH_NAMESPACES


CROSS_DEVICE = "[cross-device]"  # suffix the recorder gives a copy between devices (host offload)


def is_allowed(policy: str, name: str) -> bool:
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if policy == "kernelbench":
        return True
    if name.endswith(CROSS_DEVICE):
        return False
    namespace, packet = op_key(name)
    if namespace not in TORCH_NAMESPACES:
        return True  # an operator the candidate registered itself (TORCH_LIBRARY)
    return namespace == "aten" and packet in STRICT_ALLOWED


def forbidden(policy: str, counts: dict[str, int]) -> dict[str, int]:
    return {name: count for name, count in sorted(counts.items()) if not is_allowed(policy, name)}


def make_recorder(on_uninitialized: Callable[[Any], None] | None = None) -> Any:
    """A TorchDispatchMode counting every operator that reaches the dispatcher; it never raises,
    so a candidate cannot catch a refusal and take another path. `on_uninitialized` sees each
    tensor torch.empty and friends hand out (from Python or the extension's C++) before the
    candidate does; operators it runs are not counted (the mode is off inside)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpRecorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: Counter[str] = Counter()
            # Operators run while a CUDA graph captures: a replay runs their kernels again
            # later with no operator reaching the dispatcher.
            self.captured: Counter[str] = Counter()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = str(func)
            devices = {a.device for a in args if isinstance(a, torch.Tensor)}
            if len(devices) > 1 and op_key(name)[1] in LAYOUT_COPIES:
                name += CROSS_DEVICE
            self.counts[name] += 1
            if torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
                self.captured[name] += 1
            out = func(*args, **(kwargs or {}))
            if on_uninitialized and type(out) is torch.Tensor and op_key(name)[1] in UNINITIALIZED:
                on_uninitialized(out)
            return out

    return OpRecorder()


def ops_under(events: Any, label: str) -> dict[str, int]:
    """Counts of the outermost torch operators run inside `record_function(label)`, from a
    torch.profiler event list. An operator nested in another torch operator is its
    implementation and is not counted; one nested in a custom operator is: that is how the
    profiler sees what a custom operator's C++ calls, which the dispatch mode cannot."""
    counts: Counter[str] = Counter()
    for event in events:
        name = getattr(event, "name", "")
        if "::" not in name or not is_torch_op(name):
            continue
        parent = event.cpu_parent
        while parent is not None and parent.name != label and not is_torch_op(parent.name):
            parent = parent.cpu_parent
        if parent is not None and parent.name == label:
            counts[name] += 1
    return dict(counts)


def unseen_by(mode_counts: dict[str, int], profiler_counts: dict[str, int]) -> dict[str, int]:
    """Profiler-seen operators the dispatch mode did not see (same namespace and name)."""
    seen = {op_key(name) for name in mode_counts}
    return {name: n for name, n in sorted(profiler_counts.items()) if op_key(name) not in seen}
