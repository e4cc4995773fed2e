"""The binary encoding (builder.py) and the index-width analysis (ranges.py), in isolation."""

from __future__ import annotations

import struct

from tensorsmith.codegen.spirv.builder import ModuleBuilder, string_words
from tensorsmith.codegen.spirv.ranges import RangeAnalysis
from tensorsmith.codegen.spirv.spec import MAGIC, VERSION_1_3
from tensorsmith.codegen.spirv.tools import disassemble, validate
from tensorsmith.ir.te.expr import Load, Var, const


def words(m: ModuleBuilder) -> tuple[int, ...]:
    raw = m.to_bytes()
    return struct.unpack(f"<{len(raw) // 4}I", raw)


def test_strings_are_nul_terminated_and_word_padded() -> None:
    assert string_words("main") == [0x6E69616D, 0]
    assert string_words("abc") == [0x00636261]
    assert string_words("") == [0]


def test_constants_are_deduplicated_by_bits() -> None:
    m = ModuleBuilder()
    f32, i64 = m.t_float(32), m.t_int(64)
    assert m.const(f32, 1.0) == m.const(f32, 1) != m.const(f32, 2.0)
    assert m.const(f32, 0.0) != m.const(f32, -0.0)
    assert m.const(i64, -1) == m.const(i64, -1)
    assert m.t_float(32) == f32  # types too


def test_literal_encodings() -> None:
    m = ModuleBuilder()
    cases = [(m.t_int(64), -2, [0xFFFFFFFE, 0xFFFFFFFF]), (m.t_int(64), 2**40, [0, 256]),
             (m.t_int(8), -1, [0xFFFFFFFF]), (m.t_int(8, False), 255, [0xFF]),
             (m.t_float(16), 1.0, [0x3C00]), (m.t_float(32), 1e39, [0x7F800000]),
             (m.t_float(32), float("-inf"), [0xFF800000]),
             (m.t_float(64), 1.0, [0, 0x3FF00000])]
    for type_id, value, expected in cases:
        cid = m.const(type_id, value)
        w = words(m)
        at = next(i for i in range(5, len(w)) if w[i] & 0xFFFF == 43 and w[i + 2] == cid)
        assert list(w[at + 3:at + (w[at] >> 16)]) == expected, (value, expected)


def test_header_and_a_minimal_valid_compute_module() -> None:
    m = ModuleBuilder()
    fid, fb = m.function()
    m.end_function(fid, fb)
    m.entry_point(fid, "main", [], (1, 1, 1))
    w = words(m)
    assert w[0] == MAGIC and w[1] == VERSION_1_3 and w[4] == 0
    assert w[3] == m.new_id()  # the bound is one past the largest id
    validate(m.to_bytes(), "minimal")
    text = disassemble(m.to_bytes())
    assert text is None or 'OpEntryPoint GLCompute %1 "main"' in text.replace("%main", "%1")


def test_index_expressions_narrow_to_32_bits_when_they_provably_fit() -> None:
    ranges = RangeAnalysis()
    block, thread, k = Var("b"), Var("t"), Var("k")
    ranges.bind(block, 0, 1000)
    ranges.bind(thread, 0, 63)
    ranges.bind(k, 0, 2**20)
    flat = block * 64 + thread
    assert ranges.fits32(flat) and ranges.interval(flat) == (0, 64063)
    assert ranges.interval(flat % 13) == (0, 12) and ranges.interval(flat // 64) == (0, 1000)
    assert not ranges.fits32(k * 2**20)  # 2^40: stays 64-bit
    assert not ranges.fits32((k * 2**20) // 2**20)  # a subexpression overflows
    assert ranges.interval(Load(object(), (flat,), "int64")) is None  # data: unknown
    assert ranges.nonnegative(flat) and not ranges.nonnegative(flat - const(1))
