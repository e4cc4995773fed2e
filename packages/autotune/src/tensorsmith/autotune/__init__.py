"""tensorsmith-autotune: searches schedules for tensorsmith's tensor programs (Ansor-style).

    from tensorsmith.autotune import extract_tasks, tune
    tasks = extract_tasks(mod, params, "llvm")
    result = tune(tasks, "tune.jsonl", trials=200)
    choose_in_model(mod, params, "llvm", tasks, "tune.jsonl")  # the final word, in place
    lib = tensorsmith.ir.build(mod, "llvm", params, records="tune.jsonl")

The pieces, one module each: ``task`` (task extraction), ``space`` (the search
space: the knobs the target's default rules ask for), ``features`` and
``cost_model`` (a gradient-boosted ranking model), ``search`` (evolutionary search),
``measure``/``batch``/``runner_main`` (building and isolated timing; ``dask_measure`` for
Dask distributed), ``records`` (JSON-lines tuning records), ``scheduler`` (trials across
tasks), ``tuner`` (the loop), ``confirm`` and ``in_model`` (the final choice: re-measured
side by side, then timed inside the model), ``model_timing`` (builds of a model timed
together), ``outcome`` (what tuning bought, timed inside the model), ``progress`` and
``plot`` (the progress bars and the curves of ``tensorsmith tune``). Names below are
imported on first use, so importing this package stays cheap.
"""

from importlib import import_module
from importlib import metadata as _metadata
from typing import Any

try:
    __version__ = _metadata.version("tensorsmith-autotune")
except _metadata.PackageNotFoundError:  # a source tree on sys.path: the one version
    from tensorsmith.runtime._version import __version__

_LAZY = {
    "Task": "task", "extract_tasks": "task",
    "SearchSpace": "space",
    "extract_features": "features",
    "CostModel": "cost_model",
    "LocalBuilder": "measure", "LocalRunner": "measure", "MeasureInput": "measure",
    "RecordLog": "records",
    "TaskScheduler": "scheduler",
    "Tuner": "tuner", "TuneResult": "tuner", "tune": "tuner",
    "choose_in_model": "in_model",
    "measure_outcome": "outcome",
    "plot_curves": "plot",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
