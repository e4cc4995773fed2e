"""TfIdfVectorizer over integer tokens (the n-gram pool and its weights are attributes).

Each pooled n-gram's count is a sum over its skip distances of the positions where the
shifted input slices all equal the n-gram's tokens: comparisons, an And, a reduction. The
counting rules are ONNX's reference implementation's: n-grams of 2 or more tokens are
counted at every distance 1 .. max_skip_count + 1, unigrams once.
"""

from __future__ import annotations

import numpy as np

from tensorsmith.ir.graph import Value
from tensorsmith.ir.symbolic import shape_text

from ..context import NodeContext
from ..registry import converter
from .common import reshape


@converter("TfIdfVectorizer", since=9)
def convert_tfidf_vectorizer(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.attr("pool_strings") is not None:
        raise ctx.error("string pools are not supported (integer tokens only)")
    if len(x.shape) not in (1, 2):
        raise ctx.error(f"needs [C] or [B, C] tokens, got {shape_text(x.shape)}")
    pool = [int(v) for v in ctx.required_attr("pool_int64s")]
    starts = [int(v) for v in ctx.required_attr("ngram_counts")] + [len(pool)]
    indexes = [int(v) for v in ctx.required_attr("ngram_indexes")]
    lo, hi = int(ctx.required_attr("min_gram_length")), int(ctx.required_attr("max_gram_length"))
    skips = int(ctx.required_attr("max_skip_count"))
    mode = str(ctx.required_attr("mode"))
    weights = ctx.attr("weights")
    grams: list[tuple[int, ...]] = []
    for n in range(1, len(starts)):
        chunk = pool[starts[n - 1]:starts[n]]
        grams += [tuple(chunk[i:i + n]) for i in range(0, len(chunk), n)]
    if len(grams) != len(indexes):
        raise ctx.error(f"{len(grams)} pooled n-grams but {len(indexes)} ngram_indexes")
    tokens = x if x.dtype == "int64" else ctx.add("cast", [x], {"dtype": "int64"})
    length = x.shape[-1]
    lead = list(x.shape[:-1])
    zero = ctx.const(np.zeros(lead, np.float32), hint="zero")

    def shifted(start: int, count: int) -> Value:
        return ctx.add("slice", [tokens], {"begin": [0] * len(lead) + [start],
                                           "end": [*lead, start + count],
                                           "step": [1] * (len(lead) + 1)})

    columns: dict[int, Value] = {}
    for gram, index in zip(grams, indexes):
        n = len(gram)
        total = zero
        if lo <= n <= hi:
            for distance in ([1] if n == 1 else range(1, skips + 2)):
                count = length - distance * (n - 1)
                if count <= 0:
                    continue
                match: Value | None = None
                for t, token in enumerate(gram):
                    hit = ctx.add("eq", [shifted(t * distance, count),
                                         ctx.const(np.int64(token), hint="token")])
                    match = hit if match is None else ctx.add("and", [match, hit])
                assert match is not None
                found = ctx.add("reduce_sum", [ctx.add("cast", [match], {"dtype": "float32"})],
                                {"axes": [len(lead)], "keepdims": False})
                total = ctx.add("add", [total, found])
        columns[index] = total
    size = max(indexes) + 1
    parts = [columns.get(i, zero) for i in range(size)]
    cols = [reshape(ctx, p, (*lead, 1)) for p in parts]
    counts = cols[0] if len(cols) == 1 else ctx.add("concat", cols, {"axis": len(lead)})
    if mode == "TF":
        return counts
    w = np.ones(size, np.float32) if weights is None else \
        np.asarray(weights, np.float32).reshape(-1)
    if mode == "IDF":
        present = ctx.add("gt", [counts, ctx.const(np.float32(0))])
        return ctx.add("where", [present, ctx.const(w, hint="weights"),
                                 ctx.const(np.float32(0))])
    if mode == "TFIDF":
        return ctx.add("mul", [counts, ctx.const(w, hint="weights")])
    raise ctx.error(f"unknown mode {mode!r}")

