"""Which node cases a tensor compiler takes, and why the others are left out.

A case is out of scope when its model touches something that is not a tensor program
with a deterministic answer (first matching reason wins, in the order of ``REASONS``):

* the training domain (Adagrad, Adam, Momentum), the traditional-ML domain
  ``ai.onnx.ml`` and the experimental ``ai.onnx.preview`` domain;
* non-tensor values: strings, sequences, optionals, maps;
* element types NumPy has no dtype for, which reach a backend as ``ml_dtypes`` arrays
  whose dtype the outputs must keep (bfloat16, the float8 family, float4/float6 and the
  4- and 2-bit integers);
* nondeterministic outputs (Bernoulli, Random*, Dropout in training mode): the expected
  values come from NumPy's generator, which no backend reproduces;
* image decoding (ImageDecoder: JPEG/PNG codecs, not tensor arithmetic).

Everything else is in scope, including ops tensorsmith does not convert yet: a missing
converter is a failure, never an exclusion.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx
from onnx import AttributeProto, TensorProto

from .cases import NodeCase

REASONS: dict[str, str] = {
    "training": "ai.onnx.preview.training domain (Adagrad, Adam, Momentum)",
    "ai.onnx.ml": "traditional-ML domain (LabelEncoder, TreeEnsemble, ...)",
    "preview": "ai.onnx.preview domain (experimental ops)",
    "string": "string tensors (String* ops, RegexFullMatch, Cast to/from STRING, ...)",
    "sequence/optional/map": "sequence, optional or map values (Sequence*, Optional*, "
                             "SplitToSequence, If/Loop with sequence outputs)",
    "float8/bfloat16": "bfloat16, float8 (E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ/E8M0), float4/float6 "
                       "and 4-/2-bit integer tensors: ml_dtypes arrays, not NumPy dtypes",
    "random": "nondeterministic outputs (Bernoulli, Random*, Dropout in training mode)",
    "image-decode": "ImageDecoder (JPEG/PNG decoding)",
}

_ML_DTYPES = {TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ,
              TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ, TensorProto.UINT4,
              TensorProto.INT4, TensorProto.FLOAT4E2M1}
_ML_DTYPES |= {getattr(TensorProto, n) for n in ("FLOAT8E8M0", "UINT2", "INT2", "FLOAT6E2M3",
                                                 "FLOAT6E3M2") if hasattr(TensorProto, n)}
_RANDOM_OPS = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform",
               "RandomUniformLike", "Multinomial"}
_NON_TENSOR_OPS = ("Sequence", "Optional", "SplitToSequence", "ConcatFromSequence")
_DTYPE_ATTRS = ("to", "dtype", "output_dtype", "stash_type")


def exclusion(case: NodeCase) -> str | None:
    """The key of ``REASONS`` that puts ``case`` out of scope, or None when in scope."""
    model = case.model
    nodes = list(_nodes(model.graph))
    domains = {n.domain for n in nodes}
    if "ai.onnx.preview.training" in domains:
        return "training"
    if "ai.onnx.ml" in domains:
        return "ai.onnx.ml"
    if "ai.onnx.preview" in domains:
        return "preview"
    elem_types, kinds = _types(model.graph)
    if TensorProto.STRING in elem_types or any(n.op_type.startswith(("String", "Regex"))
                                               for n in nodes):
        return "string"
    if kinds - {"tensor_type"} or any(n.op_type.startswith(_NON_TENSOR_OPS) for n in nodes):
        return "sequence/optional/map"
    if elem_types & _ML_DTYPES:
        return "float8/bfloat16"
    if any(n.op_type in _RANDOM_OPS or _training_dropout(n) for n in nodes):
        return "random"
    if any(n.op_type == "ImageDecoder" for n in nodes):
        return "image-decode"
    return None


def _training_dropout(node: onnx.NodeProto) -> bool:
    return node.op_type == "Dropout" and len(node.input) > 2 and bool(node.input[2])


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node, subgraphs (If/Loop/Scan bodies) included."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for g in _subgraphs(attr):
                yield from _nodes(g)


def _subgraphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _types(graph: onnx.GraphProto) -> tuple[set[int], set[str]]:
    """Element types of every tensor and the kinds of every value ('tensor_type',
    'sequence_type', ...), in ``graph`` and its subgraphs."""
    elems: set[int] = set()
    kinds: set[str] = set()

    def visit_type(t: onnx.TypeProto) -> None:
        kind = t.WhichOneof("value")
        if kind is None:
            return
        kinds.add(kind)
        if kind in ("tensor_type", "sparse_tensor_type"):
            elems.add(getattr(t, kind).elem_type)
        elif kind == "sequence_type":
            visit_type(t.sequence_type.elem_type)
        elif kind == "optional_type":
            visit_type(t.optional_type.elem_type)
        elif kind == "map_type":
            elems.add(t.map_type.key_type)
            visit_type(t.map_type.value_type)

    def visit_graph(g: onnx.GraphProto) -> None:
        for vi in (*g.input, *g.output, *g.value_info):
            visit_type(vi.type)
        elems.update(t.data_type for t in g.initializer)
        for node in g.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.TENSOR:
                    elems.add(attr.t.data_type)
                elif attr.type == AttributeProto.TENSORS:
                    elems.update(t.data_type for t in attr.tensors)
                elif attr.type == AttributeProto.INT and attr.name in _DTYPE_ATTRS:
                    elems.add(attr.i)
                elif attr.type == AttributeProto.TYPE_PROTO:
                    visit_type(attr.tp)
                for sub in _subgraphs(attr):
                    visit_graph(sub)

    visit_graph(graph)
    return elems, kinds
