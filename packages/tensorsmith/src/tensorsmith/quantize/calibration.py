"""Calibration: run the float model on the samples and pick a range for each tensor that
will be quantized.

The model is compiled once by tensorsmith with those tensors as extra outputs
(engine.py) and run sample by sample; graph inputs among them come straight from the
feeds. ``minmax`` needs one pass; ``percentile`` and ``entropy`` need a second, over a
histogram laid out on the first pass's range (observers.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import numpy as np

from .engine import CompiledModel
from .errors import QuantizeError
from .observers import METHODS, HistogramObserver, MinMaxObserver
from .samples import Feed

T = TypeVar("T")
Progress = Callable[[Iterable[T], int, str], Iterator[T]]


def check_method(method: str, percentile: float) -> None:
    """A QuantizeError for an unknown method or a percentile outside (50, 100]."""
    if method not in METHODS:
        raise QuantizeError(f"unknown calibration method {method!r}; choose one of "
                            f"{', '.join(METHODS)}")
    if not 50.0 < percentile <= 100.0:
        raise QuantizeError(f"the percentile must be in (50, 100], got {percentile}")


def collect_ranges(engine: CompiledModel, samples: Sequence[Feed], tensors: Sequence[str],
                   method: str = "minmax", percentile: float = 99.99,
                   progress: Progress | None = None) -> dict[str, tuple[float, float]]:
    """``{tensor: (lo, hi)}`` for each of ``tensors`` that the samples give a float32
    value (others, integer tensors say, are left out: they are not quantized)."""
    check_method(method, percentile)
    steps = 1 if method == "minmax" else 2
    minmax: dict[str, MinMaxObserver] = {}
    for values in _values(engine, samples, tensors, progress, f"calibrating 1/{steps}"):
        for name, array in values.items():
            minmax.setdefault(name, MinMaxObserver(name)).update(array)
    ranges = {name: observer.range() for name, observer in minmax.items()}
    if method == "minmax":
        return ranges
    histograms = {name: HistogramObserver(name, lo, hi, absolute=method == "entropy")
                  for name, (lo, hi) in ranges.items()}
    for values in _values(engine, samples, tensors, progress, "calibrating 2/2"):
        for name, array in values.items():
            histograms[name].update(array)
    if method == "percentile":
        return {name: h.percentile_range(percentile) for name, h in histograms.items()}
    return {name: h.entropy_range() for name, h in histograms.items()}


def _values(engine: CompiledModel, samples: Sequence[Feed], tensors: Sequence[str],
            progress: Progress | None, label: str) -> Iterator[dict[str, np.ndarray]]:
    """Per sample, the float32 values of ``tensors`` by name."""
    wanted = set(tensors)
    steps = progress(samples, len(samples), label) if progress else iter(samples)
    for feed in steps:
        outputs = {**engine.run(feed), **feed}
        missing = wanted - outputs.keys()
        if missing:
            raise QuantizeError(f"calibration got no value for {sorted(missing)}")
        yield {n: outputs[n] for n in tensors if outputs[n].dtype == np.float32}


def terminal_progress(items: Iterable[T], total: int, label: str) -> Iterator[T]:
    """A progress bar on stderr: tqdm's where it is installed, else a plain counter."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _counter(items, total, label)
    return iter(tqdm(items, total=total, desc=label, unit="sample", leave=False,
                     file=sys.stderr))


def _counter(items: Iterable[T], total: int, label: str) -> Iterator[T]:
    for index, item in enumerate(items, 1):
        yield item
        print(f"\r{label}: {index}/{total}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
