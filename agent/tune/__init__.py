"""Budget-aware, coarse-to-fine tuning of the parameters a kernel declares, with an experience library."""

from agent.tune.budget import Budget, BudgetSpec, parse_duration
from agent.tune.cache import CacheFile, ReplayEvaluator, load_cache, write_cache
from agent.tune.experience import ExperienceLibrary, Features, similarity
from agent.tune.expr import Expr, ExprError
from agent.tune.models import Finalist, Measurement, SearchOutcome, TuneResult
from agent.tune.runner import TuneOptions, run_tuning
from agent.tune.search import Search, SearchOptions
from agent.tune.space import DeviceLimits, Space, SpaceError, SpaceFile, load_space_file
from agent.tune.tool import render, tune_tool

__all__ = [
    "Budget",
    "BudgetSpec",
    "CacheFile",
    "DeviceLimits",
    "ExperienceLibrary",
    "Expr",
    "ExprError",
    "Features",
    "Finalist",
    "Measurement",
    "ReplayEvaluator",
    "Search",
    "SearchOptions",
    "SearchOutcome",
    "Space",
    "SpaceError",
    "SpaceFile",
    "TuneOptions",
    "TuneResult",
    "load_cache",
    "load_space_file",
    "parse_duration",
    "render",
    "run_tuning",
    "similarity",
    "tune_tool",
    "write_cache",
]
