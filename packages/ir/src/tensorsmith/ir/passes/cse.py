"""Common-subexpression elimination: nodes with the same op, inputs and attributes
compute the same values once; constants with the same contents are stored once."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..graph import Graph, Node, Value


class _SameConstants:
    """One Value per distinct constant contents (dtype, shape and bytes).

    Folding and merging create constants per use: an RNN unrolled over 31 steps had its
    recurrent weights concatenated again at every step (31 copies of the same 768 KiB
    per layer, a 48 MiB artifact for a 2-layer GRU), and every step then read its own
    copy from memory instead of the one in cache."""

    def __init__(self) -> None:
        self.by_digest: dict[tuple[str, tuple[int, ...], bytes], list[Value]] = {}

    def canonical(self, v: Value) -> Value:
        if v.data is None:
            return v
        data = np.asarray(v.data)
        key = (v.dtype, tuple(v.shape), _fingerprint(data))
        same = self.by_digest.setdefault(key, [])
        for other in same:
            if other is v or np.array_equal(other.data, data):  # type: ignore[arg-type]
                return other
        same.append(v)
        return v


#: Elements of a constant its fingerprint reads, evenly spaced.
FINGERPRINT_SAMPLES = 4096


def _fingerprint(data: np.ndarray) -> bytes:
    """A digest of evenly spaced elements: constants that differ almost always differ
    there, and equal ones are then compared whole. Hashing every byte of every weight
    took a second of GPT-2's build (420 MB) to find none equal."""
    flat = data.reshape(-1)
    sample = np.ascontiguousarray(flat[::max(1, flat.size // FINGERPRINT_SAMPLES)])
    return hashlib.blake2b(sample.tobytes(), digest_size=16).digest()


def _key(node: Node, ids: dict[int, int]) -> str:
    inputs = ",".join(str(ids.get(v.uid, v.uid)) for v in node.inputs)
    return f"{node.op}({inputs}){json.dumps(node.attrs, sort_keys=True, default=str)}"


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    ids: dict[int, int] = {}  # value uid -> canonical value uid
    canonical: dict[int, Value] = {}
    seen: dict[str, Node] = {}
    kept: list[Node] = []
    constants = _SameConstants()
    for node in graph.nodes:
        node.inputs = [constants.canonical(canonical.get(v.uid, v)) for v in node.inputs]
        key = _key(node, ids)
        twin = seen.get(key)
        if twin is not None:
            for mine, theirs in zip(node.outputs, twin.outputs):
                canonical[mine.uid] = theirs
                ids[mine.uid] = theirs.uid
            continue
        seen[key] = node
        kept.append(node)
    graph.nodes = kept
    graph.replace_results(canonical)
    return graph
