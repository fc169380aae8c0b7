"""The tool tests share the run tests' ReLU task, build cache and tool context."""

from tests.run.conftest import build_cache, make_context, relu_task  # noqa: F401
