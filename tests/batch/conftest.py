"""One fake evaluator (two fake GPUs, two worker processes each) shared by the batch tests:
starting a worker imports torch, which takes seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.batch.executors.local import LocalEvaluator
from tests.batch.helpers import fake_config, fake_evaluator


@pytest.fixture(scope="session")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEvaluator]:
    tmp = tmp_path_factory.mktemp("evaluator")
    ev = fake_evaluator(fake_config(tmp, tmp, tmp, compile_workers=4))
    assert isinstance(ev, LocalEvaluator) and ev.evals_per_gpu == 2
    yield ev
    ev.close()
