"""A single-file `model_new.py` that rebuilds a workspace's extension from embedded sources with
`torch.utils.cpp_extension.load`, so the solution runs with torch alone (no kernel-agent needed)."""

from __future__ import annotations

from agent.workspace import MODEL_ENTRY, Snapshot

HARNESS_BUILD_FILES = ("binding.cpp", "binding_registry.h")

BUILD_DIR_PRELUDE = (
    "import os as _os\n"
    "if _os.environ.get('TORCH_EXTENSIONS_DIR'):  # the referee's build folder: built once, at compile\n"
    "    _os.environ['KERNEL_AGENT_STANDALONE_DIR'] = _os.environ['TORCH_EXTENSIONS_DIR']\n"
)
"""Put before a standalone model that is itself built and judged by the harness (a region's solution
in a composed model): its extension is then built in the sandbox's build folder, at compile time."""

_PROLOGUE = '''"""Standalone ModelNew for {task}, written by kernel-agent (content {content_hash}).

The CUDA extension is rebuilt from the sources embedded below on first import (cached by content
under $KERNEL_AGENT_STANDALONE_DIR or the temp folder). Needs torch with CUDA, nvcc (CUDA_HOME) and
ninja; set TORCH_CUDA_ARCH_LIST (e.g. 9.0) to build for another GPU than the visible one.
"""

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from torch.utils.cpp_extension import load

SOURCES = {{
{sources}
}}

MODEL_SOURCE = {model_source}


def _vendor_flags(text):
    """Include and link cuBLAS/cuDNN when the sources use them: from the CUDA toolkit, else from
    torch's nvidia wheels (as the harness's own builds find them)."""
    from torch.utils.cpp_extension import CUDA_HOME

    roots = [(Path(CUDA_HOME) / "include", Path(CUDA_HOME) / "lib64")] if CUDA_HOME else []
    try:
        import nvidia

        for base in map(Path, nvidia.__path__):
            roots += [(sub / "include", sub / "lib") for sub in sorted(base.iterdir()) if (sub / "lib").is_dir()]
    except ImportError:
        pass
    includes, flags = [], []
    for name, header in (("cublas", "cublas_v2.h"), ("cudnn", "cudnn.h")):
        if name not in text:
            continue
        for include, lib in roots:
            libs = sorted(lib.glob(f"lib{{name}}.so*")) if lib.is_dir() else []
            if not libs:
                continue
            if (include / header).is_file():
                includes.append(str(include))
            link = f"-l{{name}}" if (lib / f"lib{{name}}.so").exists() else f"-l:{{libs[0].name}}"
            flags += [f"-L{{lib}}", link, f"-Wl,-rpath,{{lib}}"]
            break
        else:
            flags.append(f"-l{{name}}")
    return includes, flags


def _build():
    digest = hashlib.sha256(repr(sorted(SOURCES.items())).encode()).hexdigest()[:16]
    root = Path(os.environ.get("KERNEL_AGENT_STANDALONE_DIR") or tempfile.gettempdir()) / f"kernel-agent-{{digest}}"
    for rel, text in SOURCES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    sources = [str(root / rel) for rel in SOURCES if rel.endswith((".cu", ".cpp"))]
    includes, ldflags = _vendor_flags("".join(SOURCES.values()))
    return load(
        name=f"cuda_extension_{{digest}}",
        sources=sources,
        extra_cflags=["-O1"],
        extra_cuda_cflags=["-O3", "-lineinfo"],
        extra_include_paths=includes,
        extra_ldflags=ldflags,
        build_directory=str(root),
        verbose=os.environ.get("KERNEL_AGENT_STANDALONE_VERBOSE") == "1",
    )


sys.modules["cuda_extension"] = _build()
exec(compile(MODEL_SOURCE, "{entry}", "exec"))
'''


def python_literal(text: str) -> str:
    """A Python literal for `text`: a readable raw triple-quoted string when that is exact, else repr."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return f"r'''{text}'''"
    return repr(text)


def standalone_model(snapshot: Snapshot, harness_files: dict[str, str], *, task: str) -> str:
    """The text of the standalone model_new.py for the model files in `snapshot`."""
    sources = {name: harness_files[name] for name in HARNESS_BUILD_FILES}
    sources |= {rel: text for rel, text in sorted(snapshot.files.items()) if rel.startswith("kernels/")}
    lines = ",\n".join(f"    {name!r}: {python_literal(text)}" for name, text in sources.items())
    return _PROLOGUE.format(
        task=task,
        content_hash=snapshot.content_hash[:12],
        sources=lines,
        model_source=python_literal(snapshot.files[MODEL_ENTRY]),
        entry=MODEL_ENTRY,
    )
