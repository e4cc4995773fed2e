"""Mutations of an ONNX model: at the field level (the proto stays parseable, its meaning
changes) and at the byte level (the serialized proto itself is damaged)."""

from __future__ import annotations

import random
from collections.abc import Callable

import onnx
from onnx import AttributeProto

#: Dims and ints at the edges: zero, negative, around 2**31, 2**48 and 2**63.
INTERESTING_INTS = [0, 1, 2, 3, -1, -2, 7, 255, 2**31 - 1, 2**31, 2**32 + 1, 2**48,
                    2**62, 2**63 - 1, -(2**63)]
INTERESTING_FLOATS = [0.0, -1.0, 1e-30, 1e30, float("nan"), float("inf"), -float("inf")]
OPS = ["Relu", "Add", "MatMul", "Conv", "Gather", "Reshape", "Concat", "Softmax",
       "Transpose", "Identity", "Sigmoid", "Flatten", "Gemm", "MaxPool", "Mul", "Where",
       "Expand", "Slice", "ReduceSum", "Cast", "NoSuchOp"]
OPSETS = [1, 6, 11, 13, 18, 21, 99]

Mutation = Callable[[onnx.ModelProto, random.Random], None]


def _value_infos(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    return [*model.graph.input, *model.graph.output]


def mutate_dim(model: onnx.ModelProto, rng: random.Random) -> None:
    """A dim of a graph input or output: an edge value, symbolic, dropped or added."""
    shape = rng.choice(_value_infos(model)).type.tensor_type.shape
    how = rng.randrange(4)
    if how == 0 or not shape.dim:
        shape.dim.add().dim_value = rng.choice(INTERESTING_INTS[:8])
    elif how == 1:
        del shape.dim[rng.randrange(len(shape.dim))]
    elif how == 2:
        shape.dim[rng.randrange(len(shape.dim))].dim_param = "N"
    else:
        shape.dim[rng.randrange(len(shape.dim))].dim_value = rng.choice(INTERESTING_INTS)


def mutate_attribute(model: onnx.ModelProto, rng: random.Random) -> None:
    """An attribute's value set to an edge value, an element dropped, or the attribute
    removed; a node without attributes gets an unknown one."""
    node = rng.choice(model.graph.node)
    if not node.attribute or rng.random() < 0.15:
        node.attribute.append(onnx.helper.make_attribute(rng.choice(["axis", "bogus"]),
                                                         rng.choice(INTERESTING_INTS)))
        return
    attr = rng.choice(node.attribute)
    if rng.random() < 0.15:
        node.attribute.remove(attr)
    elif attr.type == AttributeProto.INT:
        attr.i = rng.choice(INTERESTING_INTS)
    elif attr.type == AttributeProto.FLOAT:
        attr.f = rng.choice(INTERESTING_FLOATS)
    elif attr.type == AttributeProto.INTS and attr.ints and rng.random() < 0.7:
        attr.ints[rng.randrange(len(attr.ints))] = rng.choice(INTERESTING_INTS)
    elif attr.type == AttributeProto.INTS and attr.ints:
        del attr.ints[rng.randrange(len(attr.ints))]
    else:
        attr.ints.append(rng.choice(INTERESTING_INTS))


def mutate_op_type(model: onnx.ModelProto, rng: random.Random) -> None:
    rng.choice(model.graph.node).op_type = rng.choice(OPS)


def mutate_dtype(model: onnx.ModelProto, rng: random.Random) -> None:
    """The element type of an input, output or initializer (its data left as it is)."""
    dtype = rng.choice([*range(0, 17), 23, 99])
    if model.graph.initializer and rng.random() < 0.4:
        rng.choice(model.graph.initializer).data_type = dtype
    else:
        rng.choice(_value_infos(model)).type.tensor_type.elem_type = dtype


def mutate_initializer(model: onnx.ModelProto, rng: random.Random) -> None:
    """An initializer's dims no longer match its data, or its data is cut short."""
    init = rng.choice(model.graph.initializer)
    how = rng.randrange(4)
    if how == 0 and init.dims:
        init.dims[rng.randrange(len(init.dims))] = rng.choice(INTERESTING_INTS)
    elif how == 1:
        init.dims.append(rng.choice([1, 2, 3]))
    elif how == 2 and init.raw_data:
        init.raw_data = init.raw_data[: rng.randrange(len(init.raw_data))]
    else:
        del init.dims[:]


def mutate_name(model: onnx.ModelProto, rng: random.Random) -> None:
    """A tensor name changed: to one no node makes, to another existing one, or empty."""
    node = rng.choice(model.graph.node)
    names = [n for nd in model.graph.node for n in (*nd.input, *nd.output)]
    new = rng.choice(["", "missing", rng.choice(names), rng.choice(names) + "_"])
    field = node.input if node.input and rng.random() < 0.6 else node.output
    field[rng.randrange(len(field))] = new


def mutate_io(model: onnx.ModelProto, rng: random.Random) -> None:
    """A graph input or output removed or duplicated, or an initializer made an input."""
    g = model.graph
    field = rng.choice([g.input, g.output])
    how = rng.randrange(3)
    if how == 0 and field:
        del field[rng.randrange(len(field))]
    elif how == 1 and field:
        field.append(field[rng.randrange(len(field))])
    elif g.initializer:
        init = rng.choice(g.initializer)
        g.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type,
                                                          list(init.dims)))


def mutate_nodes(model: onnx.ModelProto, rng: random.Random) -> None:
    """A node removed, duplicated, or moved before the nodes it reads."""
    nodes = model.graph.node
    i = rng.randrange(len(nodes))
    how = rng.randrange(3)
    if how == 0:
        del nodes[i]
    elif how == 1:
        nodes.append(nodes[i])
    else:
        node = onnx.NodeProto()
        node.CopyFrom(nodes[i])
        del nodes[i]
        nodes.insert(0, node)


def mutate_opset(model: onnx.ModelProto, rng: random.Random) -> None:
    model.opset_import[0].version = rng.choice(OPSETS)


FIELD_MUTATIONS: list[Mutation] = [mutate_dim, mutate_attribute, mutate_op_type, mutate_dtype,
                                   mutate_initializer, mutate_name, mutate_io, mutate_nodes,
                                   mutate_opset]


def damage_bytes(data: bytes, rng: random.Random) -> bytes:
    """Bits flipped, a span overwritten or inserted, or the end cut off."""
    buf = bytearray(data)
    how = rng.randrange(4)
    if how == 0:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif how == 1:
        at = rng.randrange(len(buf))
        buf[at:at + rng.randint(1, 16)] = rng.randbytes(rng.randint(1, 16))
    elif how == 2:
        at = rng.randrange(len(buf))
        buf[at:at] = rng.randbytes(rng.randint(1, 16))
    else:
        del buf[rng.randrange(len(buf)):]
    return bytes(buf)
