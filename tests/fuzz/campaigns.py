"""The five campaigns. Each is a function of a seed and a scratch folder that either
returns (the case ran: None, or why its result differs from the reference) or raises.
The worker classifies what it raised; nothing here decides what counts as clean."""

from __future__ import annotations

import copy
import functools
import json
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import tensorsmith.runtime as rt
from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir import build, run_graph
from tensorsmith.ir.graph import Graph
from tensorsmith.runtime.artifact import FOOTER

from .models import BASE_MODELS, indexing, mismatch, mlp, random_inputs, record_convnet
from .onnx_mutations import FIELD_MUTATIONS, INTERESTING_INTS, damage_bytes

Campaign = Callable[[int, Path], "str | None"]


def compile_and_check(source: onnx.ModelProto | Path, seed: int, work: Path) -> str | None:
    """Import, build, export, load and run ``source``; compare with the interpreter and,
    where it takes the model, onnxruntime."""
    graph, params = from_onnx(source)
    lib = build(graph, "llvm", params=params)
    lib.export_library(work / "m.so")
    inputs = random_inputs(graph, np.random.default_rng(seed))
    if inputs is None:
        return None  # valid but too big to run in a test: compiling it was the case
    with rt.load(work / "m.so") as module:
        got = module.run(inputs)
    return mismatch(got, run_graph(graph, inputs)) or _ort_mismatch(source, inputs, got)


def _ort_mismatch(source: onnx.ModelProto | Path, inputs: dict[str, np.ndarray],
                  got: list[np.ndarray]) -> str | None:
    """onnxruntime's verdict on a model both accept; it refuses many mutants (no verdict)."""
    import onnxruntime as ort

    data = source.SerializeToString() if isinstance(source, onnx.ModelProto) else source
    try:
        session = ort.InferenceSession(data if isinstance(data, bytes) else str(data),
                                       providers=["CPUExecutionProvider"])
        want = session.run(None, inputs)
    except Exception:
        return None
    why = mismatch(got, want)
    return f"onnxruntime: {why}" if why else None


def onnx_case(seed: int, work: Path) -> str | None:
    """A base model with one to three field mutations, or its serialized bytes damaged."""
    rng = random.Random(seed)
    model = BASE_MODELS[rng.choice(sorted(BASE_MODELS))]()
    if rng.random() < 0.25:
        path = work / "m.onnx"
        path.write_bytes(damage_bytes(model.SerializeToString(), rng))
        return compile_and_check(path, seed, work)
    for _ in range(rng.randint(1, 3)):
        rng.choice(FIELD_MUTATIONS)(model, rng)
    return compile_and_check(model, seed, work)


# -- artifacts ----------------------------------------------------------------------------
@functools.cache
def base_artifact(root: Path) -> tuple[Path, bytes, Graph]:
    """The MLP compiled once per worker into its folder ``root`` (the parent of every
    case's folder): the artifact's path, its bytes and the graph."""
    graph, params = from_onnx(mlp())
    path = root / "base.so"
    build(graph, "llvm", params=params).export_library(path)
    return path, path.read_bytes(), graph


def regions(data: bytes) -> dict[str, tuple[int, int]]:
    """[start, end) of the payload, each section, the metadata and the footer."""
    _, _, _, meta_at, meta_len = FOOTER.unpack(data[-FOOTER.size:])
    sections = json.loads(data[meta_at:meta_at + meta_len])["sections"]
    out = {name: (at, at + n) for name, (at, n) in sections.items()}
    out["payload"] = (0, min([meta_at, *(at for at, _ in out.values())]))
    out["metadata"] = (meta_at, meta_at + meta_len)
    out["footer"] = (len(data) - FOOTER.size, len(data))
    return out


def damage_artifact(data: bytes, rng: random.Random) -> bytes:
    """Bits flipped, bytes overwritten or cut out inside one region, or the file cut short."""
    start, end = rng.choice(sorted(regions(data).items()))[1]
    buf = bytearray(data)
    how = rng.randrange(5)
    at = rng.randrange(start, end)
    if how == 0:
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
    elif how == 1:
        n = rng.randint(1, 32)
        buf[at:at + n] = rng.choice([bytes(n), b"\xff" * n, rng.randbytes(n)])
    elif how == 2:
        del buf[at:at + rng.randint(1, 64)]
    elif how == 3:
        del buf[at:]
    else:
        buf += rng.randbytes(rng.randint(1, 64))
    return bytes(buf)


def artifact_case(seed: int, work: Path) -> str | None:
    """Damage a compiled artifact, then load and run it."""
    rng = random.Random(seed)
    _, data, graph = base_artifact(work.parent)
    path = work / "damaged.so"
    path.write_bytes(damage_artifact(data, rng))
    inputs = random_inputs(graph, np.random.default_rng(seed))
    assert inputs is not None
    with rt.load(path) as module:
        got = module.run(inputs)
    return mismatch(got, run_graph(graph, inputs))


# -- tuning records -----------------------------------------------------------------------
@functools.cache
def base_record() -> dict[str, Any]:
    """A tuned, non-default schedule of record_convnet's convolution."""
    from tensorsmith.autotune.records import make_record
    from tensorsmith.autotune.space import SearchSpace
    from tensorsmith.autotune.task import extract_tasks

    task = next(t for t in extract_tasks(record_convnet()) if "conv2d" in t.key)
    space = SearchSpace(task)
    steps = space.steps(space.sample(random.Random(6)))
    return make_record(task.key, "llvm", steps, [1e-4], None)


def _slots(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value in a JSON tree (the root is ``()``)."""
    out = [path]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += _slots(v, (*path, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += _slots(v, (*path, i))
    return out


def _strings(tree: Any) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    values = tree.values() if isinstance(tree, dict) else tree if isinstance(tree, list) else []
    return [s for v in values for s in _strings(v)]


def _replacement(old: Any, rec: dict[str, Any], rng: random.Random) -> Any:
    """A new value for ``old``: an edge number, another type, or another name."""
    how = rng.randrange(3)
    if how == 0:
        return rng.choice([*INTERESTING_INTS, 4, 64, 65, 1.5, 1e308, float("nan"),
                           float("inf")])
    if how == 1:
        return rng.choice([None, True, False, "x", [], {}, [1], {"a": 1}, 3.0, [[]]])
    if isinstance(old, str) and rng.random() < 0.5:
        return rng.choice([old + "_1", old[:-1], old.upper(), ""])
    return rng.choice(_strings(rec))


def tamper_record(rec: dict[str, Any], rng: random.Random) -> Any:
    """One value replaced, or a list element or key dropped, duplicated or moved."""
    path = rng.choice(_slots(rec)[1:])
    parent = rec
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    how = rng.randrange(4)
    if how == 0:
        del parent[key]
    elif how == 1 and isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), copy.deepcopy(parent[key]))
    elif how == 2 and isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), parent.pop(key))
    else:
        parent[key] = _replacement(parent[key], rec, rng)
    return rec


def records_case(seed: int, work: Path) -> str | None:
    """Build record_convnet with one to three tamperings of a real record applied."""
    rng = random.Random(seed)
    rec = copy.deepcopy(base_record())
    for _ in range(rng.randint(1, 3)):
        tamper_record(rec, rng)
    line = json.dumps(rec)
    if rng.random() < 0.1:
        line = line[: rng.randrange(len(line))]
    path = work / "records.jsonl"
    path.write_text(json.dumps(base_record()) * (rng.random() < 0.3) + "\n" + line + "\n")
    graph = record_convnet()
    build(graph, "llvm", records=path).export_library(work / "r.so")
    x = np.random.default_rng(seed).standard_normal((1, 2, 6, 7)).astype("float32")
    with rt.load(work / "r.so") as module:
        got = module.run({"x": x})
    return mismatch(got, run_graph(graph, {"x": x}))


# -- runtime misuse -----------------------------------------------------------------------
def _odd_value(x: np.ndarray, rng: random.Random) -> Any:
    """``x`` in a wrong dtype or shape, as Python data, or something else entirely."""
    return rng.choice([
        lambda: x.astype(rng.choice(["float64", "float16", "int32", "int64", "bool",
                                     "complex64", "object", "U3", "uint8"])),
        lambda: x.reshape(rng.choice([(8, 2), (2, 8, 1), (16,), (1, 2, 8)])),
        lambda: np.zeros(rng.choice([(0, 8), (), (2, 9), (3, 8)]), "float32"),
        lambda: x.tolist(),
        lambda: [[1.0, 2.0], [3.0]],
        lambda: rng.choice([None, "x", 3.0, b"\0" * 64, {"a": 1}]),
        lambda: np.asfortranarray(x),
        lambda: np.repeat(x, 2, axis=1)[:, ::2],
        lambda: x[::-1],
    ])()


def _misuse_run(module: Any, x: np.ndarray, rng: random.Random) -> tuple[Any, Any]:
    """One wrong (or merely unusual) call; returns (what ran, the input it ran on)."""
    how = rng.randrange(6)
    if how == 0:
        value = _odd_value(x, rng)
        return module.run({"x": value}), value
    if how == 1:
        key = rng.choice(["X", "", "x ", 0, 1, -1, 5, True, 1.0, None])
        return module.run({key: x}), x
    if how == 2:
        return module.run(rng.choice([{}, {"x": x, "extra": x}])), x
    if how == 3:
        module.set_input("x", x)
        return [module.get_output(rng.choice([0, 1, -1, -2, "y", "z", 0.0]))], None
    if how == 4:
        module.run({"x": x})
        out = np.empty(rng.choice([(2, 4), (4, 2), (2, 4, 1)]), rng.choice(["float32", "int32"]))
        return [module.get_output(0, out=out)], x
    module.close()
    return rng.choice([lambda: module.run({"x": x}), lambda: module.set_input("x", x),
                       lambda: module.get_output(0), lambda: module.profile({"x": x}, 1)])(), x


def _concurrent_close(module: Any, x: np.ndarray) -> None:
    """Runs on another thread while the module is closed: each ends well or in InputError."""
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            for _ in range(200):
                module.run({"x": x})
        except rt.InputError:
            pass
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    module.close()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def misuse_case(seed: int, work: Path) -> str | None:
    """A loaded model called wrongly; an accepted call must still compute the right thing."""
    rng = random.Random(seed)
    base, _, graph = base_artifact(work.parent)
    x = np.random.default_rng(seed).standard_normal((2, 8)).astype("float32")
    module = rt.load(base)
    try:
        if rng.random() < 0.15:
            _concurrent_close(module, x)
            return None
        got, used = _misuse_run(module, x, rng)
    finally:
        module.close()
    if used is None:
        return None
    want = run_graph(graph, {"x": np.asarray(used, dtype="float32").reshape(2, 8)})
    return mismatch(list(got), want)


# -- run-time indices ---------------------------------------------------------------------
#: each indices input of models.indexing(): the extent each of its values indexes
INDEX_EXTENTS = {"ids": (7,), "cols": (5,), "cells": (4, 5), "rows": (4,)}


@functools.cache
def indexing_artifact(root: Path) -> Path:
    graph, params = from_onnx(indexing())
    path = root / "indexing.so"
    build(graph, "llvm", params=params).export_library(path)
    return path


def indices_case(seed: int, work: Path) -> str | None:
    """Indices drawn from twice each extent on both sides: a run with any out of range
    must raise (an InputError naming the node), one with all in range match onnxruntime."""
    import onnxruntime as ort

    rng = np.random.default_rng(seed)
    spread = rng.random() < 0.5  # half the cases mostly in range
    feeds: dict[str, np.ndarray] = {"patch": rng.standard_normal((2, 5)).astype("float32")}
    outside = False
    for name, extents in INDEX_EXTENTS.items():
        shape = {"ids": (5,), "cols": (4, 2), "cells": (3, 2), "rows": (2, 1)}[name]
        n = np.broadcast_to(np.asarray(extents), shape)
        wide = 2 * n if spread else n + (rng.random() < 0.2)
        values = np.floor(rng.random(shape) * (2 * wide) - wide).astype("int64")
        outside |= bool(np.any((values < -n) | (values >= n)))
        feeds[name] = values
    with rt.load(indexing_artifact(work.parent)) as module:
        got = module.run(feeds)  # raises for any index out of range
    if outside:
        return "an index out of range ran without an error"
    want = ort.InferenceSession(indexing().SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    return mismatch(got, want)


CAMPAIGNS: dict[str, Campaign] = {"onnx": onnx_case, "artifact": artifact_case,
                                  "records": records_case, "misuse": misuse_case,
                                  "indices": indices_case}
