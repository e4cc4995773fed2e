"""Detection ops with data-dependent output: ``non_max_suppression`` and ``nonzero``.

How many boxes NMS keeps, or how many elements are nonzero, is known only once the
kernel has run. Both ops therefore give one row per result, at most as many as the
inputs allow, and a ``count``: the rows below it are the answer, the rest zero. With a
``rows`` attribute (a counted size less one, builder.counted_size) the result has that
many rows: the executor places it for the bound, learns the count once the kernel has
run, and the later ops see the kept rows only (the interpreter's reference gives just
those). ``nonzero``'s rows are ONNX's columns: a transpose after it gives ONNX's layout.
Their kernels carry state from one candidate to the next (the greedy selection; the
position of the next nonzero), which no tensor expression states: they are written
directly as tensor IR (ir/direct.py, te/handwritten.py).

The selection follows ONNX Runtime's NonMaxSuppression exactly: a box is a candidate
when its score is above (strictly) ``score_threshold`` (all are when that is -inf: how
the converter passes an absent threshold); candidates are taken in descending score,
the lower box index first among equal scores; a candidate is kept unless its IoU with a
box kept before it is above ``iou_threshold``, up to ``max_output`` per (batch, class).
IoU is computed as ORT computes it, in float32: corners normalised by min/max, and a
pair with an empty intersection, or a box of zero or negative area, never suppresses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..op_registry import Attrs, Pattern, TensorType, attr_dim, check, check_dim, register
from ..symbolic import Dim, dim_min, math_prod
from ..te.expr import Expr, Load, Var, binary, cast, const, select
from ..te.handwritten import Local, at, load, loop, seq, spread, store
from ..te.stmt import Buffer, For, IfThenElse, Stmt, all_of
from ..te.symbols import extent_value

# -- non_max_suppression ------------------------------------------------------------------


def _nms_attrs(attrs: Attrs) -> tuple[int, Dim]:
    """center_point_box, and max_output: an int, or a size computed from an input's
    value (its converter makes it at least 0)."""
    center = int(attrs.get("center_point_box", 0))
    check(center in (0, 1), f"non_max_suppression center_point_box must be 0 or 1, not {center}")
    limit = attr_dim(attrs.get("max_output", 0), "non_max_suppression max_output")
    check(not isinstance(limit, int) or limit >= 0,
          f"non_max_suppression max_output must be >= 0, not {limit}")
    return center, limit


def counted_rows(attrs: Attrs, padded: Dim) -> Dim:
    """The result's rows: the counted size less one that ``rows`` names, else ``padded``."""
    return attr_dim(attrs["rows"], "rows") if "rows" in attrs else padded


def counted_result(padded: np.ndarray, count: int, attrs: Attrs) -> np.ndarray:
    """The reference's result: the kept rows only where the rows are counted."""
    return padded[:count] if "rows" in attrs else padded


def _nms_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    boxes, scores, iou, score = inputs
    _, limit = _nms_attrs(attrs)
    check(len(boxes.shape) == 3 and boxes.shape[2] == 4,
          f"non_max_suppression boxes must be [batch, boxes, 4], not {list(boxes.shape)}")
    check(len(scores.shape) == 3, "non_max_suppression scores must be [batch, classes, "
          f"boxes], not {list(scores.shape)}")
    for t, what in ((boxes, "boxes"), (scores, "scores"), (iou, "iou_threshold"),
                    (score, "score_threshold")):
        check(t.dtype == "float32", f"non_max_suppression {what} must be float32, not {t.dtype}")
    for t, what in ((iou, "iou_threshold"), (score, "score_threshold")):
        check(tuple(t.shape) in ((), (1,)),
              f"non_max_suppression {what} must be a scalar, not {list(t.shape)}")
    check_dim(scores.shape[0], "==", boxes.shape[0],
              "non_max_suppression boxes and scores must have the same batch")
    check_dim(scores.shape[2], "==", boxes.shape[1],
              "non_max_suppression scores must have one per box")
    rows = _nms_rows(boxes.shape[0], scores.shape[1], boxes.shape[1], limit)
    return [TensorType((counted_rows(attrs, rows), 3), "int64"), TensorType((), "int64")]


def _nms_rows(batch: Dim, classes: Dim, boxes: Dim, limit: Dim) -> Dim:
    """The most rows: every (batch, class) keeping its most boxes."""
    return batch * classes * dim_min(boxes, limit)


def _corners(box: np.ndarray, center: int) -> tuple[np.ndarray, ...]:
    """(x_min, y_min, x_max, y_max) of boxes [..., 4], in float32, as ORT derives them."""
    if center:
        half_w, half_h = box[..., 2] / np.float32(2), box[..., 3] / np.float32(2)
        return (box[..., 0] - half_w, box[..., 1] - half_h, box[..., 0] + half_w,
                box[..., 1] + half_h)
    y1, x1, y2, x2 = (box[..., k] for k in range(4))
    return (np.where(x1 >= x2, x2, x1), np.where(y1 >= y2, y2, y1),
            np.where(x1 >= x2, x1, x2), np.where(y1 >= y2, y1, y2))


def _suppresses(a: Sequence[np.ndarray], b: Sequence[np.ndarray],
                threshold: np.float32) -> np.ndarray:
    """Whether box ``a``'s IoU with each of boxes ``b`` is above ``threshold``."""
    ax0, ay0, ax1, ay1 = a
    bx0, by0, bx1, by1 = b
    ix0, ix1 = np.where(ax0 < bx0, bx0, ax0), np.where(bx1 < ax1, bx1, ax1)
    iy0, iy1 = np.where(ay0 < by0, by0, ay0), np.where(by1 < ay1, by1, ay1)
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    return ((ix1 > ix0) & (iy1 > iy0) & (inter > 0) & (area_a > 0) & (area_b > 0)
            & (union > 0) & (iou > threshold))


def _nms_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    boxes, scores = (np.asarray(a, np.float32) for a in arrays[:2])
    iou = np.float32(np.asarray(arrays[2]).reshape(-1)[0])
    floor = np.float32(np.asarray(arrays[3]).reshape(-1)[0])
    center, limit = _nms_attrs(attrs)
    batch, classes, n = scores.shape
    keep = min(n, int(limit))
    out = np.zeros((batch * classes * keep, 3), np.int64)
    count = 0
    for b in range(batch):
        corners = _corners(boxes[b], center)
        for c in range(classes):
            s = scores[b, c]
            live = (s > floor) | (floor == -np.inf)
            for _ in range(keep):
                candidates = np.flatnonzero(live)
                if candidates.size == 0:
                    break
                best = candidates[np.argmax(s[candidates])]  # the first of equal maxima
                live[best] = False
                out[count] = (b, c, best)
                count += 1
                live &= ~_suppresses([x[best] for x in corners], corners, iou)
    return [counted_result(out, count, attrs), np.array(count, np.int64)]


def _box_corners(boxes: Buffer, b: Expr, i: Expr, center: int) -> tuple[Expr, ...]:
    """The kernel's :func:`_corners` of box ``boxes[b, i]``."""
    v = [load(boxes, b, i, k) for k in range(4)]
    if center:
        half_w, half_h = v[2] / const(2.0), v[3] / const(2.0)
        return v[0] - half_w, v[1] - half_h, v[0] + half_w, v[1] + half_h
    y1, x1, y2, x2 = v
    return (select(x1 >= x2, x2, x1), select(y1 >= y2, y2, y1),
            select(x1 >= x2, x1, x2), select(y1 >= y2, y1, y2))


# the slots of the kernel's local geometry: the kept box's corners and area, then the
# candidate's, then the intersection's corners and area
_KEPT, _OTHER, _CUT = 0, 5, 10


def _geometry(g: Local, at_slot: int, corners: tuple[Expr, ...]) -> Stmt:
    """Store four corners at ``at_slot`` of ``g``, and the area they span after them."""
    x0, y0, x1, y1 = (g[at_slot + k] for k in range(4))
    return seq(*(g.put(at_slot + k, c) for k, c in enumerate(corners)),
               g.put(at_slot + 4, (x1 - x0) * (y1 - y0)))


def _suppresses_kept(g: Local, threshold: Expr) -> tuple[Stmt, Expr]:
    """(statements, condition): whether the candidate in ``g`` has an IoU above
    ``threshold`` with the kept box, as :func:`_suppresses` decides it."""
    ax0, ay0, ax1, ay1, area_a = (g[_KEPT + k] for k in range(5))
    bx0, by0, bx1, by1, area_b = (g[_OTHER + k] for k in range(5))
    cut = _geometry(g, _CUT, (select(ax0 < bx0, bx0, ax0), select(ay0 < by0, by0, ay0),
                              select(bx1 < ax1, bx1, ax1), select(by1 < ay1, by1, ay1)))
    ix0, iy0, ix1, iy1, inter = (g[_CUT + k] for k in range(5))
    union = area_a + area_b - inter
    return cut, all_of([ix1 > ix0, iy1 > iy0, inter > 0.0, area_a > 0.0, area_b > 0.0,
                        union > 0.0, inter / union > threshold])


def _nms_kernel(inputs: list[Buffer], outputs: list[Buffer], attrs: Attrs, family: str
                ) -> tuple[Stmt, list[Buffer]]:
    """Per (batch, class), in parallel: list the candidates (the boxes above the score
    threshold), then up to K times take the best one still in and drop those it
    suppresses, writing the kept boxes to that pair's K rows (the rest marked -1): each
    pass reads the candidates only, O(N + K * candidates). Then, in one sequential
    pass, move the kept rows to the front in order, zero the rest, and write the count.
    On a GPU the two parts are two dispatches (te/dispatch.py), so the second sees all
    the first wrote. (With counted rows, the result's rows while the kernel runs are the
    bound: the padded rows.)"""
    boxes, scores, iou_in, floor_in = inputs
    selected, count = outputs
    center, limit = _nms_attrs(attrs)
    batch, classes, n = scores.shape
    keep = dim_min(n, limit)
    live = Buffer("live", (batch * classes, n), "int32")
    listed = family != "gpu"  # candidates listed, or flagged per box (see ``mark``)
    out = -1 if listed else 0  # what ``live`` holds for a candidate that is out
    zero = const(0)
    iou = load(iou_in, *([zero] * len(iou_in.shape)))
    floor = load(floor_in, *([zero] * len(floor_in.shape)))

    def pair(bc: Expr) -> Stmt:
        b, c = bc // classes, bc % classes
        best, top, kept = Local("best", "int64"), Local("top", "float32"), Local("kept", "int64")
        chosen, found = Local("chosen", "int64"), Local("found", "int64")
        geometry = Local("geometry", "float32", _CUT + 5)

        def score(i: Expr) -> Expr:  # scores[b, c, i], whose flat index is live's
            return Load(scores, (at(live, bc, i),), scores.dtype)

        def over_candidates(body: Callable[[Expr, Expr], Stmt], name: str) -> Stmt:
            """``body(j, box)`` for each candidate ``j`` still in: a loop as long as the
            list, ``live[bc, j]`` its box (-1 once out); on a GPU, over every box, ``live``
            a flag per box (see below)."""
            j = Var(name)
            if not listed:
                return For(j, extent_value(n), "serial",
                           IfThenElse(load(live, bc, j).ne(0), body(j, j)))
            box = load(live, bc, j).astype("int64")
            return For(j, found.value, "serial", IfThenElse(box >= 0, body(j, box)))

        def suppress(j: Expr, box: Expr) -> Stmt:
            cut, overlaps = _suppresses_kept(geometry, iou)
            return seq(_geometry(geometry, _OTHER, _box_corners(boxes, b, box, center)), cut,
                       IfThenElse(overlaps, store(live, [bc, j], out)))

        def take(k: Expr) -> Stmt:
            search = over_candidates(lambda j, box: IfThenElse(
                binary("or", best.value < 0, score(box) > top.value),
                seq(chosen.set(j), best.set(box), top.set(score(box)))), "candidate")
            row = bc * keep + kept.value
            keep_best = seq(store(live, [bc, chosen.value], out),
                            store(selected, [row, 0], b), store(selected, [row, 1], c),
                            store(selected, [row, 2], best.value), kept.set(kept.value + 1),
                            _geometry(geometry, _KEPT,
                                      _box_corners(boxes, b, best.value, center)),
                            over_candidates(suppress, "candidate"))
            # once a search finds nothing, every later one would not either
            return IfThenElse(kept.value.eq(k), seq(best.set(-1), top.set(float("-inf")), search,
                                                    IfThenElse(best.value >= 0, keep_best)))

        # the candidates, in box order (so the first of equal scores is the lower box),
        # listed at the front of the pair's row of ``live``: the searches read only them.
        # (On a GPU a flag per box instead: lavapipe computed wrong results reading boxes
        # at indices loaded from the list; the flags are the slower, proven form.)
        def passes(i: Expr) -> Expr:
            return binary("or", score(i) > floor, floor.eq(float("-inf")))

        if listed:
            mark = seq(found.set(0), loop(n, lambda i: IfThenElse(
                passes(i), seq(store(live, [bc, found.value], i),
                               found.set(found.value + 1))), "box"))
        else:
            mark = loop(n, lambda i: store(live, [bc, i], select(passes(i), 1, 0)), "box")
        empty = loop(keep, lambda k: seq(*(store(selected, [bc * keep + k, j], -1 if j == 0 else 0)
                                           for j in range(3))), "slot")
        body = seq(kept.set(0), mark, empty, loop(keep, take, "pick"))
        return Local.scope([best, top, kept, chosen, found, geometry], body)

    rows = selected.shape[0]
    total = Local("total", "int64")

    def gather(r: Expr) -> Stmt:
        move = seq(*(store(selected, [total.value, j], load(selected, r, j)) for j in range(3)),
                   total.set(total.value + 1))
        return IfThenElse(load(selected, r, 0) >= 0, move)

    def clear(r: Expr) -> Stmt:
        return IfThenElse(r >= total.value, seq(*(store(selected, [r, j], 0) for j in range(3))))

    compact = Local.scope([total], seq(total.set(0), loop(rows, gather, "row"),
                                       loop(rows, clear, "row"), store(count, [], total.value)))
    return seq(spread(batch * classes, pair, "pair", family), compact), [live]


register("non_max_suppression", Pattern.OPAQUE, _nms_infer, _nms_reference,
         num_inputs=(4, 4), kernel=_nms_kernel)

# -- nonzero --------------------------------------------------------------------------------


def _nonzero_infer(inputs: Sequence[TensorType], attrs: Attrs) -> list[TensorType]:
    x = inputs[0]
    check(len(x.shape) >= 1, "nonzero needs a tensor of rank >= 1")
    rows = counted_rows(attrs, math_prod(x.shape))
    return [TensorType((rows, len(x.shape)), "int64"), TensorType((), "int64")]


def _nonzero_reference(arrays: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x = np.asarray(arrays[0])
    found = np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1).T
    out = np.zeros((x.size, x.ndim), np.int64)
    out[:found.shape[0]] = found
    return [counted_result(out, found.shape[0], attrs), np.array(found.shape[0], np.int64)]


def _nonzero_kernel(inputs: list[Buffer], outputs: list[Buffer], attrs: Attrs, family: str
                    ) -> tuple[Stmt, list[Buffer]]:
    """One sequential scan (on every target): each nonzero element's multi-index goes to
    the next row; then the rows past the count are zeroed."""
    (x,), (indices, count) = inputs, outputs
    shape = x.shape
    size = math_prod(shape)
    strides = [math_prod(shape[d + 1:]) for d in range(len(shape))]
    total = Local("total", "int64")

    def visit(i: Expr) -> Stmt:
        element = Load(x, (i,), x.dtype)
        write = seq(*(store(indices, [total.value, d], i // s % n if d else i // s)
                      for d, (s, n) in enumerate(zip(strides, shape))),
                    total.set(total.value + 1))
        return IfThenElse(cast("bool", element), write)

    def clear(j: Expr) -> Stmt:
        return IfThenElse(j >= total.value,
                          seq(*(store(indices, [j, d], 0) for d in range(len(shape)))))

    body = seq(total.set(0), loop(size, visit, "element"), loop(indices.shape[0], clear, "row"),
               store(count, [], total.value))
    return Local.scope([total], body), []


register("nonzero", Pattern.OPAQUE, _nonzero_infer, _nonzero_reference,
         kernel=_nonzero_kernel)
