"""Tasks that load a Hugging Face model by name (KernelBench level 4) build it offline, from the
config shipped with the product, with weights from torch's seeded RNG; a name with no shipped
config fails in one line. Any network attempt fails the test (tests/network_guard.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.cli.app import app

REPO = Path(__file__).resolve().parent.parent
WORKERS = REPO / "sandbox" / "workers"

import sandbox.workers.siblings  # noqa: E402,F401  (the workers import each other by name)

# isort: split
import hub_offline  # noqa: E402  a worker module: it lives on the workers' own path

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TASK_SOURCE = "from transformers import AutoModelForCausalLM, AutoConfig\nAutoConfig.from_pretrained(name)\n"
LEVEL4_TASK = """
import torch
from transformers import AutoModelForCausalLM, AutoConfig

class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits

model_name = "{name}"
config = AutoConfig.from_pretrained(model_name)

def get_inputs():
    return [torch.randint(0, config.vocab_size, (2, 16))]

def get_init_inputs():
    return [model_name, config]
"""


@pytest.fixture
def offline_hub() -> Iterator[None]:
    """prepare() for the test, then transformers' own loaders back for the rest of the session."""
    import transformers.models.auto.modeling_auto  # noqa: F401  every Auto class defined
    from transformers import AutoConfig, PreTrainedModel
    from transformers.models.auto.auto_factory import _BaseAutoModelClass

    auto_classes: list[Any] = [_BaseAutoModelClass]
    for auto_class in auto_classes:
        auto_classes.extend(auto_class.__subclasses__())
    owners = [AutoConfig, PreTrainedModel, *auto_classes]
    saved = {owner: vars(owner)["from_pretrained"] for owner in owners if "from_pretrained" in vars(owner)}
    import huggingface_hub.constants

    offline, offline_env = huggingface_hub.constants.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE")
    hub_offline.prepare(TASK_SOURCE)
    yield
    huggingface_hub.constants.HF_HUB_OFFLINE = offline
    if offline_env is None:
        os.environ.pop("HF_HUB_OFFLINE", None)
    else:
        os.environ["HF_HUB_OFFLINE"] = offline_env
    for owner, loader in saved.items():
        setattr(owner, "from_pretrained", loader)  # noqa: B010
    hub_offline._prepared = False


@pytest.mark.parametrize(
    ("name", "layers", "parameters"),
    [
        ("gpt2", 12, 124_439_808),
        ("facebook/opt-1.3b", 24, 1_315_758_080),
        ("EleutherAI/gpt-neo-2.7B", 32, 2_651_307_520),
    ],
)
def test_a_shipped_model_builds_offline_at_its_published_size(
    offline_hub: None, name: str, layers: int, parameters: int
) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(name)
    assert config.num_hidden_layers == layers and config.name_or_path == name
    with torch.device("meta"):  # as the task inspector builds it: nothing allocated
        model = AutoModelForCausalLM.from_pretrained(name, config=config)
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert not model.training, "from_pretrained leaves a model in eval mode (dropout off)"


def test_every_shipped_config_builds_the_model_class_its_tasks_use(offline_hub: None) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    for name in hub_offline.shipped_names():
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_pretrained(name, config=AutoConfig.from_pretrained(name))
        assert model.config.vocab_size == hub_offline.shipped_config_dict(name)["vocab_size"], name


def test_the_same_seed_gives_the_same_weights(offline_hub: None) -> None:
    """The referee seeds the reference and the candidate alike: both must hold the same model."""
    from transformers import AutoModelForCausalLM

    def build(seed: int) -> dict[str, Any]:
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_pretrained("google/electra-small-discriminator").state_dict()

    first, again, other = build(7), build(7), build(8)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


def test_a_name_with_no_shipped_config_fails_in_one_line(offline_hub: None) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    for load in (AutoConfig.from_pretrained, AutoModelForCausalLM.from_pretrained):
        with pytest.raises(hub_offline.ModelNotShipped) as raised:
            load("bert-base-uncased")
        message = str(raised.value)
        assert message.startswith("this task would download bert-base-uncased from the Hugging Face Hub")
        assert "no network here" in message and "gpt2" in message and "\n" not in message


def test_a_task_that_loads_nothing_by_name_does_not_import_transformers() -> None:
    probe = (
        f"import sys; sys.path.insert(0, {str(WORKERS)!r}); import siblings, hub_offline; "
        "hub_offline.prepare('import torch\\nclass Model: pass\\n'); print('transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_agent_tasks_lists_a_shipped_model_and_names_an_unshipped_one(tmp_path: Path) -> None:
    (tmp_path / "1_gpt2.py").write_text(LEVEL4_TASK.format(name="gpt2"))
    (tmp_path / "2_bert.py").write_text(LEVEL4_TASK.format(name="bert-base-uncased"))
    result = CliRunner().invoke(app, ["tasks", str(tmp_path), "--json"])
    listed = json.loads(result.stdout)
    assert [t["name"] for t in listed["tasks"]] == ["1_gpt2"]
    assert listed["tasks"][0]["spec"]["parameters"] == 124_439_808
    (error,) = listed["errors"]
    assert "this task would download bert-base-uncased from the Hugging Face Hub" in error["problem"]
