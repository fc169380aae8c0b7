"""`agent solve` from the command line shares the run tests' ReLU task and build cache."""

from tests.run.conftest import build_cache, relu_task  # noqa: F401
