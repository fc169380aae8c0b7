"""Where untrusted code runs: the Sandbox interface, its backends and the worker scripts."""

from sandbox.base import (
    Capabilities,
    ExecResult,
    Sandbox,
    SandboxError,
    open_sandbox,
    register_sandbox,
    sandbox_kinds,
)

BACKENDS: dict[str, str] = {"local": "sandbox.local", "docker": "sandbox.docker", "auto": "sandbox.auto"}
"""The built-in sandbox kinds and the module behind each, imported by `open_sandbox` and
`sandbox_kinds` only when that kind is asked for. `local` and `docker` register their backend
(`@register_sandbox`; docker needs the docker SDK, and without it is not offered); `auto` picks
one of them (`sandbox.auto.choose_kind`)."""

__all__ = [
    "BACKENDS",
    "Capabilities",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "open_sandbox",
    "register_sandbox",
    "sandbox_kinds",
]
