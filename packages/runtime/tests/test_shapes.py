"""runtime/shapes.py without a device: size expressions, lifetimes, the binding's checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorsmith.runtime.errors import InputError
from tensorsmith.runtime.plan import Assumption, Buffer, Plan, Tensor
from tensorsmith.runtime.shapes import Binder, place_by_lifetime, size_expr


def test_size_expressions_evaluate_the_plan_text() -> None:
    assert size_expr("(seq + 1)//2")({"seq": 8}) == 4
    assert size_expr("min((batch + 63)//64, 65535)")({"batch": 10**7}) == 65535
    assert size_expr("4*batch*seq - max(seq, 3) % 2")({"batch": 2, "seq": 5}) == 39
    with pytest.raises(ValueError):
        size_expr("__import__('os')")


def test_buffers_share_bytes_only_where_their_steps_do_not_meet() -> None:
    offsets, size = place_by_lifetime({0: (100, 0, 1), 1: (100, 1, 2), 2: (50, 2, 3)}, 64)
    assert offsets[0] == 0 and offsets[1] == 128  # both live at step 1
    assert offsets[2] == 0  # buffer 0 is dead by step 2
    assert size == 256


def _plan() -> Plan:
    return Plan(symbols=("batch", "seq"),
                inputs=(Tensor("ids", ("batch", "seq"), "int64", 0),
                        Tensor("mask", ("batch", "seq"), "int64", 1)),
                outputs=(Tensor("y", ("batch", "seq", 4), "float32", 2),),
                assumptions=(Assumption("seq", "min(8, seq)", "positions"),),
                buffers=(Buffer("workspace", 0, 0, symbolic_nbytes="8*batch*seq",
                                first_step=0, last_step=1),) * 2 + (
                         Buffer("workspace", 0, 0, symbolic_nbytes="16*batch*seq",
                                first_step=0, last_step=1),))


def test_a_binding_learns_and_checks_the_symbols_like_the_cpu_library() -> None:
    binder = Binder(Path("m.tsm"), _plan(), limit=2**31 - 1)
    b = binder.bind([(2, 5), (2, 5)])
    assert b.symbols == {"batch": 2, "seq": 5} and b.output_shapes == ((2, 5, 4),)
    assert b.buffer_bytes == {0: 80, 1: 80, 2: 160}
    with pytest.raises(InputError, match="input 'mask' axis 1 is 4, but 'seq' is 5 from "
                                         "input 'ids' axis 1"):
        binder.bind([(2, 5), (2, 4)])
    with pytest.raises(InputError, match="break what the model assumes: positions; with "
                                         "batch = 1, seq = 9"):
        binder.bind([(1, 9), (1, 9)])
    with pytest.raises(InputError, match="over the limit of 2147483647 bytes"):
        binder.bind([(2**25, 8), (2**25, 8)])
    with pytest.raises(InputError, match="has 2 axes, got a shape of 1"):
        binder.check_input_shape(0, (3,))
