"""The opset-aware converter registry.

A converter turns one ONNX node into canonical graph-IR ops. ONNX versions each
operator: a model at opset N uses, for operator X, the newest version of X whose
``since`` is <= N. Converters are registered the same way, one per behaviour change::

    @converter("Softmax", since=1)    # opsets 1..12: flatten to 2-D at ``axis``
    def softmax_v1(ctx): ...

    @converter("Softmax", since=13)   # opset 13+: one axis
    def softmax_v13(ctx): ...

and :func:`lookup` picks the one for the model's opset of the node's domain.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensorsmith.ir.graph import Value

    from .context import NodeContext

ConverterFn = Callable[["NodeContext"], "Sequence[Value | None] | Value"]

DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class Converter:
    op_type: str
    domain: str
    since: int
    fn: ConverterFn


_REGISTRY: dict[tuple[str, str], list[Converter]] = {}


def canonical_domain(domain: str) -> str:
    return "" if domain in DEFAULT_DOMAINS else domain


def qualified(op_type: str, domain: str) -> str:
    """``Gemm`` for the default domain, ``com.microsoft.FusedMatMul`` otherwise."""
    domain = canonical_domain(domain)
    return f"{domain}.{op_type}" if domain else op_type


def converter(op_types: str | Iterable[str], since: int = 1, domain: str = ""
              ) -> Callable[[ConverterFn], ConverterFn]:
    """Register ``fn`` for ``op_types`` from opset ``since`` until the next registration."""
    names = [op_types] if isinstance(op_types, str) else list(op_types)

    def register(fn: ConverterFn) -> ConverterFn:
        for name in names:
            versions = _REGISTRY.setdefault((canonical_domain(domain), name), [])
            if any(c.since == since for c in versions):
                raise ValueError(f"two converters for {name} since opset {since}")
            bisect.insort(versions, Converter(name, canonical_domain(domain), since, fn),
                          key=lambda c: c.since)
        return fn

    return register


def lookup(op_type: str, domain: str, opset: int) -> Converter | None:
    """The converter for ``op_type`` at ``opset`` of its domain, or None."""
    _load()
    versions = _REGISTRY.get((canonical_domain(domain), op_type), [])
    chosen = None
    for c in versions:
        if c.since <= opset:
            chosen = c
    return chosen


def supported_ops() -> dict[str, list[int]]:
    """Qualified op name -> the opsets where its converter changes (for docs and reports)."""
    _load()
    return {qualified(op, dom): [c.since for c in versions]
            for (dom, op), versions in sorted(_REGISTRY.items())}


def _load() -> None:
    from . import converters  # noqa: F401  (registers on import)
