"""Decoding ONNX node attributes into plain Python values.

Converters read attributes by name with a default, and never see protobuf types:
strings come back as ``str``, tensors as NumPy arrays, lists as lists.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import AttributeProto, numpy_helper


def decode(attr: onnx.AttributeProto) -> Any:
    """One attribute's value. Graph attributes (If/Loop bodies) are returned as protos."""
    kind = attr.type
    if kind == AttributeProto.FLOAT:
        return float(attr.f)
    if kind == AttributeProto.INT:
        return int(attr.i)
    if kind == AttributeProto.STRING:
        return attr.s.decode("utf-8", errors="replace")
    if kind == AttributeProto.TENSOR:
        return numpy_helper.to_array(attr.t)
    if kind == AttributeProto.FLOATS:
        return [float(f) for f in attr.floats]
    if kind == AttributeProto.INTS:
        return [int(i) for i in attr.ints]
    if kind == AttributeProto.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in attr.strings]
    if kind == AttributeProto.TENSORS:
        return [numpy_helper.to_array(t) for t in attr.tensors]
    return onnx.helper.get_attribute_value(attr)


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: decode(a) for a in node.attribute}

