"""SPIR-V of the cooperative-matrix intrinsics (tensorsmith.ir.te.matrix).

SPV_KHR_cooperative_matrix: a fragment is an ``OpTypeCooperativeMatrixKHR`` of Subgroup
scope; a ``Fragment`` buffer is a Function-storage array of them (indexed by constants
once the unrolled loops are unrolled, so drivers keep them in registers). Loads and
stores are row-major with the stride in elements of the pointer's type, the buffer's
own element type. A shared tile of 16-byte words (an operand staged by the workgroup,
te/matrix_lower.py) is an array of ``uvec4``: a chunk is stored into it in one
instruction, and fragments are loaded from it through a ``uvec4`` pointer with the
stride in words, which the extension allows for exactly this ("Should we allow the
Pointer type and matrix component type to mismatch? Yes"). A tile of float16 elements
is an array of float16, a chunk stored into it as eight float16 stores (each 32-bit word
bitcast to two float16, the first element in the low half, as in memory). The extension
requires the
Vulkan memory model in a Shader module (capability VulkanMemoryModel, memory model
Vulkan; SPV_KHR_vulkan_memory_model in SPIR-V 1.3), and float16 components the Float16
capability.

16-byte chunks are read from global memory through a second view of the parameter's
binding, ``struct { uvec4 data[]; }`` (Vulkan lets variables of one binding alias).

A fragment the whole workgroup holds (``held_by="workgroup"``) is a matrix of Workgroup
scope, which SPV_NV_cooperative_matrix2 allows in SPIR-V 1.6 (the module's version is
raised to it, its entry point then listing every global variable); the workgroup size
is declared by LocalSize in the module's header, before any such type, as the
extension requires.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.te.matrix import (
    ChunkLoad,
    ChunkStore,
    Fragment,
    FragmentFill,
    FragmentLoad,
    FragmentMulAdd,
    FragmentStore,
)
from tensorsmith.ir.te.stmt import Buffer, Intrinsic

from .spec import (
    MATRIX_LAYOUT_ROW_MAJOR,
    MATRIX_USE,
    MEMORY_ACCESS_ALIGNED,
    SCOPE_SUBGROUP,
    SCOPE_WORKGROUP,
    VERSION_1_6,
    WORKGROUP_MATRIX_EXTENSION,
)

if TYPE_CHECKING:
    from .emit import DispatchEmitter

#: Component type of a fragment, by dtype.
COMPONENT = {"float16": 16, "float32": 32}


def matrix_type(em: DispatchEmitter, frag: Fragment, dtype: str | None = None) -> int:
    """The OpTypeCooperativeMatrixKHR of ``frag`` (its component ``dtype`` if given)."""
    dtype = dtype or frag.dtype
    if dtype not in COMPONENT:
        raise TargetError(f"the vulkan target has no cooperative matrices of {dtype}")
    use_cooperative_matrices(em)
    if dtype == "float16":
        em.m.capability("Float16")
    component = em.m.t_float(COMPONENT[dtype])
    scope = SCOPE_SUBGROUP
    if frag.held_by == "workgroup":
        em.m.extension(WORKGROUP_MATRIX_EXTENSION)
        em.m.require_version(VERSION_1_6)
        scope = SCOPE_WORKGROUP
    return em.m.t_cooperative_matrix(component, scope, frag.rows, frag.cols,
                                     MATRIX_USE[frag.use])


def use_cooperative_matrices(em: DispatchEmitter) -> None:
    em.m.capability("CooperativeMatrixKHR")
    em.m.capability("VulkanMemoryModel")


def allocate_fragment(em: DispatchEmitter, frag: Fragment) -> tuple[int, int]:
    """The Function-storage array of ``frag``: (variable, pointer type of one matrix)."""
    element = matrix_type(em, frag)
    var = em.fb.variable(em.m.t_pointer("Function", em.m.t_array(element, frag.size)))
    em.m.name(var, frag.name)
    return var, em.m.t_pointer("Function", element)


def emit_intrinsic(em: DispatchEmitter, s: Intrinsic) -> None:
    if isinstance(s, FragmentFill):
        ty = matrix_type(em, s.frag)
        scalar = em.m.const(em.m.t_float(COMPONENT[s.frag.dtype]), s.value)
        em.fb.do("Store", _slot(em, s.frag, s.slot), em.fb.op("CompositeConstruct", ty, scalar))
    elif isinstance(s, FragmentLoad):
        ty = matrix_type(em, s.frag)
        local = em.locals.get(id(s.src))
        value = em.fb.op("CooperativeMatrixLoadKHR", ty, _element(em, s.src, s.index),
                         _u32(em, MATRIX_LAYOUT_ROW_MAJOR), _u32(em, s.stride),
                         *_memory_operands(em, local, s.align, load=True))
        em.fb.do("Store", _slot(em, s.frag, s.slot), value)
    elif isinstance(s, FragmentStore):
        value = _fragment(em, s.frag, s.slot)
        if s.dst.dtype != s.frag.dtype:
            value = em.fb.op("FConvert", matrix_type(em, s.frag, s.dst.dtype), value)
        em.fb.do("CooperativeMatrixStoreKHR", _element(em, s.dst, s.index), value,
                 _u32(em, MATRIX_LAYOUT_ROW_MAJOR), _u32(em, s.stride),
                 *_memory_operands(em, em.locals.get(id(s.dst)), s.align, load=False))
    elif isinstance(s, FragmentMulAdd):
        a, b = _fragment(em, s.a, s.a_slot), _fragment(em, s.b, s.b_slot)
        c = _fragment(em, s.acc, s.acc_slot)
        result = em.fb.op("CooperativeMatrixMulAddKHR", matrix_type(em, s.acc), a, b, c)
        em.fb.do("Store", _slot(em, s.acc, s.acc_slot), result)
    elif isinstance(s, ChunkLoad):
        _chunk_load(em, s)
    elif isinstance(s, ChunkStore):
        _chunk_store(em, s)
    else:
        raise TargetError(f"the vulkan target cannot emit {type(s).__name__} statements")


def _memory_operands(em: DispatchEmitter, local: object, align: int, load: bool
                     ) -> tuple[int, ...]:
    """A shared tile's operands (:meth:`DispatchEmitter.shared_access`), or for global
    memory the alignment the statement guarantees (``Aligned``, a literal)."""
    if local is not None:
        return em.shared_access(local, load)  # type: ignore[arg-type]
    return (MEMORY_ACCESS_ALIGNED, align) if align > 1 else ()


def _u32(em: DispatchEmitter, value: int) -> int:
    return em.m.const(em.m.t_int(32, False), value)


def _slot(em: DispatchEmitter, buf: Buffer, slot: object) -> int:
    """A pointer to element ``slot`` of a local array (a fragment or register chunk)."""
    local = em.locals.get(id(buf))
    if local is None:
        raise TargetError(f"{buf.name} is used outside its allocation in {em.dispatch.name}")
    index = em._coerce(em.expr(slot), "i32")  # type: ignore[arg-type]
    return em.fb.op("AccessChain", local.pointer, local.variable, index.id)


def _fragment(em: DispatchEmitter, frag: Fragment, slot: object) -> int:
    return em.fb.op("Load", matrix_type(em, frag), _slot(em, frag, slot))


def _element(em: DispatchEmitter, buf: Buffer, index: object) -> int:
    """A pointer to element ``index`` of a parameter or shared buffer, of the buffer's
    own element type (what the matrix load's stride counts in)."""
    local = em.locals.get(id(buf))
    if local is None:
        return em._address(buf, index)  # type: ignore[arg-type]
    if not local.shared:
        raise TargetError(f"a cooperative matrix cannot be loaded from or stored to local "
                          f"array {buf.name}")
    i = em._coerce(em.expr(index), "i32")  # type: ignore[arg-type]
    return em.fb.op("AccessChain", local.pointer, local.variable, i.id)


def _chunk_load(em: DispatchEmitter, s: ChunkLoad) -> None:
    fb, m = em.fb, em.m
    u32 = m.t_int(32, False)
    uvec4 = m.t_vector(u32, 4)
    view = em.chunk_view(s.src)
    valid = em._as_bool(em.expr(s.valid))
    element = em._coerce(em.expr(s.index), "i32")
    chunk = fb.op("ShiftRightArithmetic", em._type("i32"), element.id, em._c32(3))
    # an invalid chunk reads chunk 0 (always there) and keeps zeros: no branch
    chunk = fb.op("Select", em._type("i32"), valid.id, chunk, em._c32(0))
    address = fb.op("AccessChain", m.t_pointer("StorageBuffer", uvec4), view, em._c32(0), chunk)
    raw = fb.op("Load", uvec4, address)
    zero = m.const(u32, 0)
    zeros = fb.op("CompositeConstruct", uvec4, zero, zero, zero, zero)
    bvec4 = m.t_vector(m.t_bool(), 4)
    mask = fb.op("CompositeConstruct", bvec4, valid.id, valid.id, valid.id, valid.id)
    fb.do("Store", _slot(em, s.regs, s.slot), fb.op("Select", uvec4, mask, raw, zeros))


def _chunk_store(em: DispatchEmitter, s: ChunkStore) -> None:
    fb, m = em.fb, em.m
    local = em.locals.get(id(s.dst))
    if local is None or local.reg not in ("tile", "half"):
        raise TargetError(f"chunks are stored only into shared tiles, not {s.dst.name} "
                          f"({s.dst.scope} {s.dst.dtype})")
    u32 = m.t_int(32, False)
    uvec4 = m.t_vector(u32, 4)
    value = fb.op("Load", uvec4, _slot(em, s.regs, s.slot))
    base = em._coerce(em.expr(s.index), "i32")
    if local.reg == "tile":  # one word
        address = fb.op("AccessChain", local.pointer, local.variable, base.id)
        fb.do("Store", address, value, *em.shared_access(local, load=False))
        return
    f16 = m.t_float(16)
    half2 = m.t_vector(f16, 2)
    i32 = em._type("i32")
    for word in range(4):
        pair = fb.op("Bitcast", half2, fb.op("CompositeExtract", u32, value, word))
        for half in range(2):
            offset = 2 * word + half
            index = fb.op("IAdd", i32, base.id, em._c32(offset)) if offset else base.id
            address = fb.op("AccessChain", local.pointer, local.variable, index)
            fb.do("Store", address, fb.op("CompositeExtract", f16, pair, half),
                  *em.shared_access(local, load=False))


__all__ = ["COMPONENT", "allocate_fragment", "emit_intrinsic", "matrix_type",
           "use_cooperative_matrices"]
