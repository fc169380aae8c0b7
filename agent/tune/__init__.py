"""Budget-aware, coarse-to-fine tuning of the parameters a kernel declares, with an experience library."""

from agent.tune.cache import CacheFile, ReplayEvaluator, load_cache, write_cache
from agent.tune.experience import ExperienceLibrary, Features, similarity
from agent.tune.expr import Expr, ExprError
from agent.tune.limits import BudgetSpec, TuneBudget
from agent.tune.render import render
from agent.tune.results import Finalist, Measurement, SearchOutcome, TuneResult
from agent.tune.runner import TuneOptions, run_tuning
from agent.tune.search import Search, SearchOptions
from agent.tune.space import DeviceLimits, Space, SpaceError, SpaceFile, load_space_file

__all__ = [
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
    "TuneBudget",
    "TuneOptions",
    "TuneResult",
    "load_cache",
    "load_space_file",
    "render",
    "run_tuning",
    "similarity",
    "write_cache",
]
