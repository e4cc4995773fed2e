"""Four-byte integer dots as one ``OpSUDot`` (target option ``-integer-dot-product=1``).

The integer ops state each step of their reduction as the sum of four byte products
(``tensorsmith.ir.te.dot4``). Written as it reads, that is four 8-bit loads and
conversions per operand, four multiplies and four adds. A device with integer dot
products (Vulkan 1.3's ``shaderIntegerDotProduct``, VK_KHR_shader_integer_dot_product
before) takes the two operands as 32-bit words of four bytes and returns the exact sum:
``OpSUDot`` (first word signed bytes: the int8 weight; second unsigned: the uint8
activation) with ``PackedVectorFormat4x8Bit``. It does not saturate (the ``AccSat``
forms would), so it is the op's int32 sum in every case.

Each operand's word is one 32-bit load through a read-only ``uint`` view of its
parameter's binding (a second variable at the same descriptor, as matrix.py's 16-byte
chunk views are), at the byte index divided by four. That needs the first byte to start
a word, which ``multiple_of`` proves from the index (the runtime binds every buffer at an
offset aligned far beyond four bytes); an operand in workgroup or private memory, or one
that cannot be proven aligned, keeps the plain form, as does every dot where the target
does not say the device has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorsmith.ir.te import dot4
from tensorsmith.ir.te.expr import Binary, Load
from tensorsmith.ir.te.stmt import Buffer

from .spec import PACKED_VECTOR_FORMAT_4X8BIT

if TYPE_CHECKING:
    from .emit import DispatchEmitter, Value


def emit(em: DispatchEmitter, e: Binary) -> Value | None:
    """``e`` as one packed dot, or None where it is no four-byte dot this can pack."""
    found = dot4.match(e)
    if found is None or not all(_packable(em, load) for load in (found.x, found.w)):
        return None
    from .emit import Value

    w, x = _word(em, found.w), _word(em, found.x)
    em.m.capability("DotProduct")
    em.m.capability("DotProductInput4x8BitPacked")
    return Value(em.fb.op("SUDot", em._type("i32"), w, x, PACKED_VECTOR_FORMAT_4X8BIT),
                 "i32")


def _packable(em: DispatchEmitter, load: Load) -> bool:
    """A parameter's bytes whose first is the first byte of a 32-bit word."""
    return id(load.buffer) in em.params and dot4.multiple_of(load.indices[0], dot4.DOT)


def _word(em: DispatchEmitter, load: Load) -> int:
    """The 32-bit word holding ``load``'s byte and the three after it."""
    buf = load.buffer
    assert isinstance(buf, Buffer)
    index = em.expr(load.indices[0])
    shift = em._const(index.reg, 2)
    word = em.fb.op("ShiftRightArithmetic", em._type(index.reg), index.id, shift.id)
    u32 = em.m.t_int(32, False)
    address = em.fb.op("AccessChain", em.m.t_pointer("StorageBuffer", u32), word_view(em, buf),
                       em._c32(0), word)
    return em.fb.op("Load", u32, address)


def word_view(em: DispatchEmitter, buf: Buffer) -> int:
    """A read-only ``struct { uint data[]; }`` view of parameter ``buf``'s binding."""
    view = em.word_views.get(id(buf))
    if view is not None:
        return view
    block = em.m.t_storage_block(em.m.t_int(32, False), 4, readonly=True)
    view = em.m.global_variable(em.m.t_pointer("StorageBuffer", block), "StorageBuffer")
    em.m.decorate(view, "DescriptorSet", 0)
    em.m.decorate(view, "Binding", em.func.params.index(buf))
    em.m.name(view, f"{buf.name}_words")
    em.word_views[id(buf)] = view
    return view


__all__ = ["emit", "word_view"]
