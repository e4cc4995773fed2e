"""Four-byte integer dots as one ``OpSUDot`` (target option ``-integer-dot-product=1``).

The integer ops state each step of their reduction as the sum of four byte products
(``tensorsmith.ir.te.dot4``). Written as it reads, that is four 8-bit loads and
conversions per operand, four multiplies and four adds. A device with integer dot
products (Vulkan 1.3's ``shaderIntegerDotProduct``, VK_KHR_shader_integer_dot_product
before) takes the two operands as 32-bit words of four bytes and returns the exact sum:
``OpSUDot`` (first word signed bytes: the int8 weight; second unsigned: the uint8
activation) with ``PackedVectorFormat4x8Bit``. It does not saturate (the ``AccSat``
forms would), so it is the op's int32 sum in every case.

An operand's word is one 32-bit load through a read-only ``uint`` view of its
parameter's binding (a second variable at the same descriptor, as matrix.py's 16-byte
chunk views are), at the byte index divided by four, where its four bytes are adjacent
in the parameter and the first starts a word (``multiple_of`` proves it from the index;
the runtime binds every buffer at an offset aligned far beyond four bytes): a matrix
product's operands, a convolution's weights. Otherwise the word is assembled from the
four values (shifts and ors; masked to a byte first where signed): an NCHW convolution's
activations, four channels a plane apart and padded. A dot whose operands both need
assembling keeps the plain form (the assembly costs about what it saves), as does every
dot where the target does not say the device has packed dots. In a register tile the
same assembled word serves every output channel, and the driver's compiler computes it
once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorsmith.ir.te import dot4
from tensorsmith.ir.te.expr import Binary, Expr, Load
from tensorsmith.ir.te.stmt import Buffer

from .spec import PACKED_VECTOR_FORMAT_4X8BIT

if TYPE_CHECKING:
    from .emit import DispatchEmitter, Value


def emit(em: DispatchEmitter, e: Binary) -> Value | None:
    """``e`` as one packed dot, or None where it is no four-byte dot this can pack."""
    found = dot4.match(e)
    if found is None:
        return None
    w_load, x_load = _loadable(em, found.ws), _loadable(em, found.xs)
    if w_load is None and x_load is None:
        return None
    from .emit import Value

    w = _word(em, w_load) if w_load is not None else _assembled(em, found.ws, signed=True)
    x = _word(em, x_load) if x_load is not None else _assembled(em, found.xs, signed=False)
    em.m.capability("DotProduct")
    em.m.capability("DotProductInput4x8BitPacked")
    return Value(em.fb.op("SUDot", em._type("i32"), w, x, PACKED_VECTOR_FORMAT_4X8BIT),
                 "i32")


def _loadable(em: DispatchEmitter, values: tuple[Expr, ...]) -> Load | None:
    """The first of ``values`` where the four are a parameter's adjacent bytes, the first
    of them the first byte of a 32-bit word; else None."""
    first = dot4.word(values)
    if first is None or id(first.buffer) not in em.params:
        return None
    return first if dot4.multiple_of(first.indices[0], dot4.DOT) else None


def _assembled(em: DispatchEmitter, values: tuple[Expr, ...], signed: bool) -> int:
    """The word of four byte values (int32 registers), byte ``j`` at bits ``8j``: each
    masked to its byte where signed (an int8 register is sign-extended), shifted, or-ed."""
    i32 = em._type("i32")
    word = 0
    for j, v in enumerate(values):
        byte = em._coerce(em.expr(v), "i32").id
        if signed and j < dot4.DOT - 1:  # (the top byte's sign bits shift out)
            byte = em.fb.op("BitwiseAnd", i32, byte, em._c32(0xFF))
        if j:
            byte = em.fb.op("ShiftLeftLogical", i32, byte, em._c32(8 * j))
        word = byte if not j else em.fb.op("BitwiseOr", i32, word, byte)
    return word


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
    return em.binding_view(buf, em.m.t_int(32, False), 4, "words")


__all__ = ["emit", "word_view"]
