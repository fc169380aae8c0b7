"""Where untrusted code runs: the Sandbox interface, its backends and the worker scripts."""

from sandbox.base import ExecResult, Sandbox, SandboxError, open_sandbox, register_sandbox, sandbox_kinds

__all__ = ["ExecResult", "Sandbox", "SandboxError", "open_sandbox", "register_sandbox", "sandbox_kinds"]
