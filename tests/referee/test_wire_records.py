"""The host's pydantic models that read a worker's record (sandbox/workers/protocol/) name the same
fields as the record's TypedDict: a field added on one side only is dropped or never filled without a
word (`model_validate` ignores unknown keys, `output_diff` keeps only the model's fields)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agent.referee.results import DeviceInfo, OutputDiff, PrecisionReport, TimingStats
from sandbox.workers.protocol import DiffRecord, PrecisionRecord, TimingRecord, WorkerDevice


def record_keys(record: type) -> set[str]:
    return set(record.__required_keys__ | record.__optional_keys__)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("model", "record", "host_only", "record_only"),
    [
        (TimingStats, TimingRecord, {"cached"}, set()),  # cached: set by the baseline cache
        (PrecisionReport, PrecisionRecord, set(), set()),
        # the host's own checks (assemble.py, diff.py) fill these in; a value leaf's reprs are not kept
        (
            OutputDiff,
            DiffRecord,
            {"output", "device_expected", "device_actual", "type_actual"},
            {"value_expected", "value_actual"},
        ),
        (DeviceInfo, WorkerDevice, set(), {"device"}),  # the host names the device itself (host_gpu)
    ],
)
def test_host_model_names_the_fields_of_the_worker_record(
    model: type[BaseModel], record: type, host_only: set[str], record_only: set[str]
) -> None:
    fields, keys = set(model.model_fields), record_keys(record)
    assert fields - keys == host_only, f"{model.__name__} fields the {record.__name__} lacks"
    assert keys - fields == record_only, f"{record.__name__} keys {model.__name__} lacks"
