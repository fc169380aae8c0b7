"""Hugging Face models by name, built offline from configs shipped beside this file (stdlib only;
transformers is imported only when a task's own source loads a model by name).

KernelBench's level-4 tasks call `AutoConfig.from_pretrained(name)` at import and
`AutoModelForCausalLM.from_pretrained(name, config=config)` in `Model.__init__`. Workers run with
no network, so `prepare(source)` makes both work from `hub_configs/<org>--<name>.json`: the config
is the published one, and the model is built with `from_config` (weights drawn from torch's RNG,
which the referee seeds identically for the reference and the candidate, so both hold the same
weights). A name with no shipped config fails in one line saying so.
"""

from __future__ import annotations

import json
import os
from typing import Any

HUB_CONFIGS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hub_configs")
_LOADER = "from_pretrained"
_prepared = False


class ModelNotShipped(OSError):
    """A task loads a model by a name this product ships no config for (it would download it)."""


def needs_hub(source: str) -> bool:
    return _LOADER in source


def shipped_names() -> list[str]:
    return sorted(
        entry.removesuffix(".json").replace("--", "/")
        for entry in os.listdir(HUB_CONFIGS_DIR)
        if entry.endswith(".json")
    )


def shipped_config_dict(name: str) -> dict[str, Any]:
    """The published config.json of `name` ("org/model" or "model"), as shipped here."""
    path = os.path.join(HUB_CONFIGS_DIR, name.replace("/", "--") + ".json")
    if "/" in name.replace("/", "", 1) or not os.path.isfile(path):
        raise ModelNotShipped(
            f"this task would download {name} from the Hugging Face Hub; no network here; "
            f"shipped configs: {', '.join(shipped_names())}"
        )
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def prepare(source: str) -> None:
    """Before a task's source runs: when it loads anything `from_pretrained`, route transformers'
    config and model loading to the shipped configs (once per process; a fork inherits it)."""
    global _prepared
    if _prepared or not needs_hub(source):
        return
    # Hub offline mode before transformers loads, and again after (where it was loaded already):
    # importing some models' code otherwise asks the Hub about attention kernels.
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub.constants
        import transformers  # noqa: F401  the task imports it too; a missing package is its error
    except ImportError:
        return
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    _patch_transformers()
    _prepared = True


def _is_local(name: Any) -> bool:
    """A folder or file on disk needs no network: transformers' own loader reads it."""
    return isinstance(name, str | os.PathLike) and os.path.exists(name)


def _patch_transformers() -> None:
    from transformers import AutoConfig, PreTrainedModel
    from transformers.models.auto.auto_factory import _BaseAutoModelClass
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    def load_config(name: str, **overrides: Any) -> Any:
        published = shipped_config_dict(str(name))
        for key in ("cache_dir", "force_download", "local_files_only", "proxies", "revision", "token"):
            overrides.pop(key, None)
        overrides.pop("trust_remote_code", None)
        returns_unused = overrides.pop("return_unused_kwargs", False)
        config_class = CONFIG_MAPPING[published["model_type"]]
        loaded: Any = config_class.from_dict(published, return_unused_kwargs=True, **overrides)
        config, unused = loaded
        config._name_or_path = str(name)
        return (config, unused) if returns_unused else config

    original_auto_config = AutoConfig.from_pretrained.__func__
    original_auto_model = _BaseAutoModelClass.from_pretrained.__func__  # the same for every Auto class
    original_model = PreTrainedModel.from_pretrained.__func__

    def auto_config_from_pretrained(cls: type, name: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_local(name):
            return original_auto_config(cls, name, *args, **kwargs)
        return load_config(name, **kwargs)

    def given_config(name: Any, config: Any) -> Any:
        """The config a model is built from: the one passed, else the one shipped for `name`."""
        if config is None or isinstance(config, str | os.PathLike):
            return auto_config_from_pretrained(AutoConfig, name if config is None else config)
        return config

    def model_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: kwargs[k] for k in ("dtype", "torch_dtype", "attn_implementation") if k in kwargs}

    def auto_model_from_pretrained(cls: type, name: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_local(name):
            return original_auto_model(cls, name, *args, **kwargs)
        config = given_config(name, kwargs.get("config"))
        return cls.from_config(config, **model_kwargs(kwargs)).eval()  # as from_pretrained leaves it

    def model_from_pretrained(cls: type, name: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_local(name):
            return original_model(cls, name, *args, **kwargs)
        config = given_config(name, kwargs.get("config"))
        return cls._from_config(config, **model_kwargs(kwargs)).eval()

    setattr(AutoConfig, _LOADER, classmethod(auto_config_from_pretrained))
    setattr(PreTrainedModel, _LOADER, classmethod(model_from_pretrained))
    # Each Auto class holds its own copy of from_pretrained (for its docstring): patch every one.
    import transformers.models.auto.modeling_auto  # noqa: F401  defines them all

    auto_classes = [_BaseAutoModelClass]
    for auto_class in auto_classes:
        auto_classes.extend(auto_class.__subclasses__())
        if _LOADER in vars(auto_class):
            setattr(auto_class, _LOADER, classmethod(auto_model_from_pretrained))
