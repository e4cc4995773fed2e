"""Calibration and evaluation samples: from an .npz file or a list of feeds, checked
against the model's inputs before anything is compiled.

An .npz holds one array per graph input, named after it, whose leading axis counts the
samples: ``x`` of shape ``[S, 1, 3, 224, 224]`` is S samples of a ``[1, 3, 224, 224]``
input. When the array has the input's own rank and the input's first axis is 1 or
symbolic, the leading axis is that batch axis, split into samples of one
(``[S, 3, 224, 224]`` works too). Every sample must have the same shape, because the
model is compiled once, for that shape.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from .errors import QuantizeError

Feed = dict[str, np.ndarray]


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs a caller feeds (old models also list their initializers as inputs)."""
    weights = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in weights]


def load_npz(path: str | os.PathLike[str], what: str = "calibration file") -> dict[str, np.ndarray]:
    """The arrays of an .npz file by name, or a QuantizeError saying why not."""
    p = Path(path)
    if not p.is_file():
        raise QuantizeError(f"{what} '{p}' does not exist" if not p.exists()
                            else f"{what} '{p}' is not a file")
    if p.suffix != ".npy" and not zipfile.is_zipfile(p):
        raise QuantizeError(f"cannot read {what} '{p}': not an .npz file (numpy.savez "
                            "writes one, with one array per graph input)")
    try:
        with np.load(p, allow_pickle=False) as data:
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise QuantizeError(f"{what} '{p}' holds one array; it must be an .npz "
                                    "(numpy.savez) with one array per graph input")
            return {name: data[name] for name in data.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise QuantizeError(f"cannot read {what} '{p}': not an .npz file ({e})") from None


def split_samples(model: onnx.ModelProto, arrays: Mapping[str, np.ndarray],
                  what: str = "calibration data", limit: int | None = None) -> list[Feed]:
    """One feed per sample from arrays with a leading sample axis (see the module doc)."""
    inputs = graph_inputs(model)
    _check_names(inputs, arrays, what)
    per_input: dict[str, list[np.ndarray]] = {}
    for info in inputs:
        array = np.asarray(arrays[info.name])
        dims = _dims(info)
        if array.ndim == len(dims) + 1:
            per_input[info.name] = list(array)
        elif array.ndim == len(dims) and dims and dims[0] in (1, None):
            per_input[info.name] = [array[i : i + 1] for i in range(array.shape[0])]
        else:
            raise QuantizeError(
                f"{what}: '{info.name}' has shape {list(array.shape)}; the model's input is "
                f"{_text(dims)}, so expected [samples, {_text(dims)[1:-1]}]")
    counts = {name: len(v) for name, v in per_input.items()}
    if len(set(counts.values())) > 1:
        raise QuantizeError(f"{what}: the inputs have different numbers of samples {counts}")
    total = next(iter(counts.values()), 0)
    if total == 0:
        raise QuantizeError(f"{what} holds no samples")
    if limit is not None:
        total = min(total, limit)
    return check_feeds(model, [{n: v[i] for n, v in per_input.items()} for i in range(total)],
                       what)


def check_feeds(model: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]],
                what: str = "calibration data") -> list[Feed]:
    """The feeds as arrays of each input's dtype, all of one shape that fits the model."""
    if not feeds:
        raise QuantizeError(f"{what} holds no samples")
    inputs = graph_inputs(model)
    checked: list[Feed] = []
    first: dict[str, tuple[int, ...]] = {}
    for index, feed in enumerate(feeds):
        _check_names(inputs, feed, what)
        out: Feed = {}
        for info in inputs:
            array = np.asarray(feed[info.name])
            dims = _dims(info)
            fits = array.ndim == len(dims) and all(d is None or d == s
                                                   for d, s in zip(dims, array.shape))
            if not fits:
                raise QuantizeError(f"{what}, sample {index}: '{info.name}' has shape "
                                    f"{list(array.shape)}, the model expects {_text(dims)}")
            if first.setdefault(info.name, array.shape) != array.shape:
                raise QuantizeError(
                    f"{what}, sample {index}: '{info.name}' has shape {list(array.shape)}, "
                    f"sample 0 has {list(first[info.name])}; every sample needs one shape")
            dtype = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
            if array.dtype != dtype:
                if not np.can_cast(array.dtype, dtype, casting="same_kind"):
                    raise QuantizeError(f"{what}: '{info.name}' is {array.dtype}, the model "
                                        f"expects {np.dtype(dtype)}")
                array = array.astype(dtype)
            out[info.name] = np.ascontiguousarray(array)
        checked.append(out)
    return checked


def shapes_of(feed: Mapping[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(a.shape) for name, a in feed.items()}


def _check_names(inputs: list[onnx.ValueInfoProto], given: Mapping[str, object],
                 what: str) -> None:
    names = [v.name for v in inputs]
    missing = [n for n in names if n not in given]
    if missing:
        extra = sorted(set(given) - set(names))
        hint = f" (it has {', '.join(map(repr, extra))})" if extra else ""
        raise QuantizeError(f"{what} lacks the model input(s) {', '.join(map(repr, missing))}"
                            f"{hint}; the model's inputs are {', '.join(map(repr, names))}")


def _dims(info: onnx.ValueInfoProto) -> list[int | None]:
    """The declared shape, None for a symbolic or unknown axis."""
    return [d.dim_value if d.HasField("dim_value") else None
            for d in info.type.tensor_type.shape.dim]


def _text(dims: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
