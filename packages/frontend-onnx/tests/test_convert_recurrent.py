"""LSTM, GRU and RNN, unrolled, against onnxruntime: directions, initial states,
peepholes, biases, layout, linear_before_reset, and every output."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_onnx_testing import check, make_model, rand
from onnx import helper

from tensorsmith.frontend.onnx import from_onnx
from tensorsmith.ir.interpreter import run_graph

SEQ, BATCH, INPUT, HIDDEN = 3, 2, 5, 4


def recurrent_model(op: str, gates: int, direction: str, layout: int = 0,
                    optional: tuple[str, ...] = (), opset: int = 14, **attrs: object):
    dirs = 2 if direction == "bidirectional" else 1
    x_shape = [BATCH, SEQ, INPUT] if layout else [SEQ, BATCH, INPUT]
    state = [BATCH, dirs, HIDDEN] if layout else [dirs, BATCH, HIDDEN]
    inits = {"W": rand(dirs, gates * HIDDEN, INPUT, seed=1, low=-0.6, high=0.6),
             "R": rand(dirs, gates * HIDDEN, HIDDEN, seed=2, low=-0.6, high=0.6)}
    names = ["X", "W", "R", "", "", "", "", ""]
    inputs = {"X": ("float32", x_shape)}
    if "B" in optional:
        inits["B"] = rand(dirs, 2 * gates * HIDDEN, seed=3, low=-0.5, high=0.5)
        names[3] = "B"
    if "lens" in optional:
        inits["lens"] = np.full(BATCH, SEQ, np.int32)
        names[4] = "lens"
    if "h0" in optional:
        inputs["h0"] = ("float32", state)
        names[5] = "h0"
    if "c0" in optional:
        inputs["c0"] = ("float32", state)
        names[6] = "c0"
    if "P" in optional:
        inits["P"] = rand(dirs, 3 * HIDDEN, seed=4, low=-0.5, high=0.5)
        names[7] = "P"
    while names and not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, names, outputs, name="rnn", hidden_size=HIDDEN,
                            direction=direction, **attrs)
    feeds = {n: rand(*s, seed=10 + i) for i, (n, (_, s)) in enumerate(inputs.items())}
    return make_model([node], inputs, outputs, inits, opset=opset), feeds


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("optional", [(), ("B", "h0", "c0"), ("B", "lens", "P")])
def test_lstm(direction: str, optional: tuple[str, ...]) -> None:
    m, feeds = recurrent_model("LSTM", 4, direction, optional=optional)
    check(m, feeds)


def test_lstm_input_forget_and_clip() -> None:
    m, feeds = recurrent_model("LSTM", 4, "bidirectional", optional=("B", "h0", "c0"),
                               input_forget=1, clip=1.5)
    check(m, feeds)


@pytest.mark.parametrize("op,gates", [("LSTM", 4), ("GRU", 3)])
def test_batch_major_layout(op: str, gates: int) -> None:
    """layout=1 ([batch, seq, ...]): onnxruntime refuses it, so compare with our own
    layout=0 import of the same weights on transposed data, itself checked against ORT."""
    optional = ("B", "h0", "c0") if op == "LSTM" else ("B", "h0")
    ref_model, ref_feeds = recurrent_model(op, gates, "bidirectional", optional=optional)
    want = run_graph(check(ref_model, ref_feeds), ref_feeds)
    model, _ = recurrent_model(op, gates, "bidirectional", layout=1, optional=optional)
    feeds = {k: np.swapaxes(v, 0, 1) for k, v in ref_feeds.items()}
    graph, _ = from_onnx(model)
    got = run_graph(graph, feeds)
    np.testing.assert_allclose(got[0], np.transpose(want[0], (2, 0, 1, 3)), atol=1e-6)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, np.swapaxes(w, 0, 1), atol=1e-6)


def test_lstm_only_final_state_at_opset7() -> None:
    """The bench model's pattern: only Y_h is used."""
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["", "Y_h"], name="lstm",
                            hidden_size=HIDDEN)
    inits = {"W": rand(1, 4 * HIDDEN, INPUT, seed=1), "R": rand(1, 4 * HIDDEN, HIDDEN, seed=2),
             "B": rand(1, 8 * HIDDEN, seed=3)}
    m = make_model([node], {"X": ("float32", [SEQ, BATCH, INPUT])}, ["Y_h"], inits, opset=7)
    check(m, {"X": rand(SEQ, BATCH, INPUT)})


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("before_reset", [0, 1])
def test_gru(direction: str, before_reset: int) -> None:
    m, feeds = recurrent_model("GRU", 3, direction, optional=("B", "h0"),
                               linear_before_reset=before_reset)
    check(m, feeds)


def test_gru_no_bias() -> None:
    m, feeds = recurrent_model("GRU", 3, "forward")
    check(m, feeds)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("activation", ["Tanh", "Relu"])
def test_rnn(direction: str, activation: str) -> None:
    acts = [activation] * (2 if direction == "bidirectional" else 1)
    m, feeds = recurrent_model("RNN", 1, direction, optional=("B", "h0"), activations=acts)
    check(m, feeds)
