"""Where the product's own files live: skills, prompts, worker scripts and caches."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    # An editable install (the documented one) reads skills/ and prompts/ from the checkout;
    # a wheel carries them inside the package under _bundled/.
    for candidate in (_PACKAGE_DIR.parent / name, _PACKAGE_DIR / "_bundled" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the {name}/ folder is missing from the installation ({_PACKAGE_DIR})")


def skills_dir() -> Path:
    return _data_dir("skills")


def prompts_dir() -> Path:
    return _data_dir("prompts")


def cache_dir() -> Path:
    """The harness's own state: baseline timings, the judge's caches, GPU gates, the experience
    library, scratch workspaces (KERNEL_AGENT_CACHE moves it). No sandbox can write here: the
    build cache sandboxes share is a sibling (sandbox.paths.default_cache_dir), one rule owned by
    the lower layer."""
    from sandbox.paths import harness_state_dir

    path = harness_state_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path
