"""A SPIR-V binary module builder: ids, deduplicated types and constants, sections.

SPIR-V requires a fixed order of module sections (capabilities, extensions, imports,
memory model, entry points, execution modes, debug names, decorations, types/constants/
globals, functions) and forbids declaring the same non-aggregate type twice. The builder
keeps one word list per section and one table per kind of deduplicated object, so the
emitter can ask for ``t_int(32)`` or ``const(f32, 1.0)`` anywhere and still produce a
valid module. Only the binary encoding lives here; what to emit is emit.py's job.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from .spec import (
    ADDRESSING_LOGICAL,
    CAPABILITY,
    DECORATION,
    EXECUTION_MODE_LOCAL_SIZE,
    EXECUTION_MODEL_GLCOMPUTE,
    EXTENSION_OF,
    GENERATOR,
    MAGIC,
    MEMORY_MODEL_GLSL450,
    MEMORY_MODEL_VULKAN,
    OP,
    STORAGE,
    VERSION_1_3,
    VERSION_1_4,
)


def string_words(text: str) -> list[int]:
    """A literal string: UTF-8, NUL-terminated, zero-padded to whole little-endian words."""
    raw = text.encode("utf-8") + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


def instruction(opcode: str, operands: list[int]) -> list[int]:
    """One instruction: word count and opcode in the first word, then the operands."""
    count = len(operands) + 1
    if count > 0xFFFF:
        raise ValueError(f"SPIR-V instruction Op{opcode} has too many operands ({count})")
    return [(count << 16) | OP[opcode], *operands]


@dataclass(frozen=True)
class Scalar:
    """What a scalar type id stands for: ``kind`` is "bool", "int", "uint" or "float"."""

    kind: str
    width: int


@dataclass
class FunctionBuilder:
    """The body of one function: its Function-storage variables and its blocks.

    Variables must be the first instructions of the entry block, but the emitter only
    discovers them while walking the body, so they are collected apart and spliced in
    when the function is finished.
    """

    module: ModuleBuilder
    code: list[int] = field(default_factory=list)
    variables: list[int] = field(default_factory=list)
    block: int = 0  # label id of the block being written

    def op(self, opcode: str, result_type: int, *operands: int) -> int:
        """Append an instruction that has a result; return the result id."""
        rid = self.module.new_id()
        self.code += instruction(opcode, [result_type, rid, *operands])
        return rid

    def op_as(self, opcode: str, result_type: int, result: int, *operands: int) -> None:
        """Like :meth:`op`, for a result id allocated earlier (a phi's forward reference)."""
        self.code += instruction(opcode, [result_type, result, *operands])

    def do(self, opcode: str, *operands: int) -> None:
        """Append an instruction without a result (store, branch, merge, barrier)."""
        self.code += instruction(opcode, list(operands))

    def ext(self, result_type: int, number: int, *operands: int) -> int:
        """A GLSL.std.450 extended instruction."""
        return self.op("ExtInst", result_type, self.module.glsl(), number, *operands)

    def label(self, label: int) -> None:
        """Start a new block."""
        self.code += instruction("Label", [label])
        self.block = label

    def variable(self, pointer_type: int) -> int:
        rid = self.module.new_id()
        self.variables += instruction("Variable", [pointer_type, rid, STORAGE["Function"]])
        return rid


class ModuleBuilder:
    """Accumulates one SPIR-V module, of version 1.3 unless something it uses needs a
    later one (:meth:`require_version`); ``to_bytes`` serialises it."""

    def __init__(self) -> None:
        self.version = VERSION_1_3
        self.variables: list[int] = []  # every global variable: a 1.4+ entry's interface
        self._bound = 1
        self.capabilities: list[str] = ["Shader"]
        self.extensions: list[str] = []
        self._glsl = 0
        self.entry_points: list[int] = []
        self.execution_modes: list[int] = []
        self.names: list[int] = []
        self.decorations: list[int] = []
        self.globals: list[int] = []  # types, constants and global variables, in order
        self.functions: list[int] = []
        self._types: dict[tuple, int] = {}
        self._consts: dict[tuple, int] = {}
        self.scalars: dict[int, Scalar] = {}

    # ---- ids, capabilities, imports ----------------------------------------------------

    def new_id(self) -> int:
        rid = self._bound
        self._bound += 1
        return rid

    def capability(self, name: str) -> None:
        if name not in CAPABILITY:
            raise KeyError(f"unknown SPIR-V capability {name}")
        if name not in self.capabilities:
            self.capabilities.append(name)
            extension = EXTENSION_OF.get(name)
            if extension and extension not in self.extensions:
                self.extensions.append(extension)

    def extension(self, name: str) -> None:
        """Declare SPIR-V extension ``name`` (one no capability implies)."""
        if name not in self.extensions:
            self.extensions.append(name)

    def require_version(self, version: int) -> None:
        """Raise the module's SPIR-V version to at least ``version`` (``VERSION_*``)."""
        self.version = max(self.version, version)

    def glsl(self) -> int:
        """The id of the GLSL.std.450 extended instruction set, imported on first use."""
        if not self._glsl:
            self._glsl = self.new_id()
        return self._glsl

    # ---- types -------------------------------------------------------------------------

    def _type(self, key: tuple, opcode: str, operands: list[int]) -> int:
        tid = self._types.get(key)
        if tid is None:
            tid = self.new_id()
            self.globals += instruction(opcode, [tid, *operands])
            self._types[key] = tid
        return tid

    def t_void(self) -> int:
        return self._type(("void",), "TypeVoid", [])

    def t_bool(self) -> int:
        tid = self._type(("bool",), "TypeBool", [])
        self.scalars[tid] = Scalar("bool", 1)
        return tid

    def t_int(self, width: int, signed: bool = True) -> int:
        tid = self._type(("int", width, signed), "TypeInt", [width, int(signed)])
        self.scalars[tid] = Scalar("int" if signed else "uint", width)
        return tid

    def t_float(self, width: int) -> int:
        tid = self._type(("float", width), "TypeFloat", [width])
        self.scalars[tid] = Scalar("float", width)
        return tid

    def t_vector(self, component: int, count: int) -> int:
        return self._type(("vec", component, count), "TypeVector", [component, count])

    def t_cooperative_matrix(self, component: int, scope: int, rows: int, cols: int,
                             use: int) -> int:
        """OpTypeCooperativeMatrixKHR: scope, rows, columns and use are constant ids."""
        u32 = self.t_int(32, False)
        operands = [component, *(self.const(u32, v) for v in (scope, rows, cols, use))]
        return self._type(("coopmat", component, scope, rows, cols, use),
                          "TypeCooperativeMatrixKHR", operands)

    def t_array(self, element: int, length: int) -> int:
        """A fixed-size array (Function or Workgroup storage: no stride decoration)."""
        n = self.const(self.t_int(32, False), length)
        return self._type(("array", element, length), "TypeArray", [element, n])

    def t_pointer(self, storage: str, pointee: int) -> int:
        return self._type(("ptr", storage, pointee), "TypePointer", [STORAGE[storage], pointee])

    def t_function(self, result: int, *params: int) -> int:
        return self._type(("fn", result, params), "TypeFunction", [result, *params])

    def t_storage_block(self, element: int, stride: int, readonly: bool) -> int:
        """``struct { T data[]; }`` decorated Block: the type of a storage buffer.

        Read-only and writable buffers get distinct struct types, because NonWritable
        decorates the struct member and a decoration applies to every use of a type.
        """
        key = ("block", element, stride, readonly)
        tid = self._types.get(key)
        if tid is not None:
            return tid
        array_key = ("rtarray", element, stride)
        fresh = array_key not in self._types
        array = self._type(array_key, "TypeRuntimeArray", [element])
        if fresh:
            self.decorate(array, "ArrayStride", stride)
        tid = self.new_id()
        self.globals += instruction("TypeStruct", [tid, array])
        self._types[key] = tid
        self.decorate(tid, "Block")
        self.member_decorate(tid, 0, "Offset", 0)
        if readonly:
            self.member_decorate(tid, 0, "NonWritable")
        return tid

    # ---- constants ---------------------------------------------------------------------

    def const(self, type_id: int, value: float | int | bool) -> int:
        """A scalar constant of ``type_id``, deduplicated by its bits."""
        scalar = self.scalars[type_id]
        if scalar.kind == "bool":
            opcode, words = ("ConstantTrue" if value else "ConstantFalse"), []
        else:
            opcode, words = "Constant", _literal_words(scalar, value)
        key = (type_id, opcode, *words)
        cid = self._consts.get(key)
        if cid is None:
            cid = self.new_id()
            self.globals += instruction(opcode, [type_id, cid, *words])
            self._consts[key] = cid
        return cid

    # ---- globals, decorations, names ---------------------------------------------------

    def global_variable(self, pointer_type: int, storage: str) -> int:
        vid = self.new_id()
        self.globals += instruction("Variable", [pointer_type, vid, STORAGE[storage]])
        self.variables.append(vid)
        return vid

    def decorate(self, target: int, decoration: str, *literals: int) -> None:
        self.decorations += instruction("Decorate", [target, DECORATION[decoration], *literals])

    def member_decorate(self, struct_type: int, member: int, decoration: str,
                        *literals: int) -> None:
        self.decorations += instruction(
            "MemberDecorate", [struct_type, member, DECORATION[decoration], *literals])

    def name(self, target: int, text: str) -> None:
        self.names += instruction("Name", [target, *string_words(text)])

    # ---- entry point and functions -----------------------------------------------------

    def entry_point(self, function: int, name: str, interface: list[int],
                    local_size: tuple[int, int, int]) -> None:
        """The entry point, once every global variable is declared: its interface lists
        ``interface`` (the Input variables) in SPIR-V 1.3, every global variable from
        1.4 on, as those versions require."""
        if self.version >= VERSION_1_4:
            interface = list(self.variables)
        self.entry_points += instruction(
            "EntryPoint", [EXECUTION_MODEL_GLCOMPUTE, function, *string_words(name), *interface])
        self.execution_modes += instruction(
            "ExecutionMode", [function, EXECUTION_MODE_LOCAL_SIZE, *local_size])

    def function(self) -> tuple[int, FunctionBuilder]:
        """Open ``void f()`` with its entry block; finish it with :meth:`end_function`."""
        fid = self.new_id()
        fb = FunctionBuilder(self)
        fb.label(self.new_id())
        return fid, fb

    def end_function(self, fid: int, fb: FunctionBuilder) -> None:
        void = self.t_void()
        fnty = self.t_function(void)
        fb.do("Return")
        entry_label = fb.code[:2]  # OpLabel %entry: variables must follow it directly
        self.functions += instruction("Function", [void, fid, 0, fnty])
        self.functions += entry_label + fb.variables + fb.code[2:]
        self.functions += instruction("FunctionEnd", [])

    # ---- serialisation -----------------------------------------------------------------

    def to_bytes(self) -> bytes:
        words: list[int] = [MAGIC, self.version, GENERATOR, self._bound, 0]
        for cap in self.capabilities:
            words += instruction("Capability", [CAPABILITY[cap]])
        for ext in self.extensions:
            words += instruction("Extension", string_words(ext))
        if self._glsl:
            words += instruction("ExtInstImport", [self._glsl, *string_words("GLSL.std.450")])
        model = (MEMORY_MODEL_VULKAN if "VulkanMemoryModel" in self.capabilities
                 else MEMORY_MODEL_GLSL450)
        words += instruction("MemoryModel", [ADDRESSING_LOGICAL, model])
        words += self.entry_points + self.execution_modes + self.names + self.decorations
        words += self.globals + self.functions
        return struct.pack(f"<{len(words)}I", *words)


def _literal_words(scalar: Scalar, value: float | int | bool) -> list[int]:
    """The words of a numeric literal: low-order word first for 64-bit values."""
    if scalar.kind == "float":
        # NumPy rounds to nearest and saturates to infinity, as a C cast would.
        with np.errstate(over="ignore"):
            raw = np.array(float(value), dtype=f"<f{scalar.width // 8}").tobytes()
        if scalar.width == 16:
            return [int.from_bytes(raw, "little")]
        return list(struct.unpack(f"<{len(raw) // 4}I", raw))
    bits = int(value) & ((1 << scalar.width) - 1)
    if scalar.width <= 32:
        if scalar.kind == "int" and scalar.width < 32 and bits >> (scalar.width - 1):
            bits |= (0xFFFFFFFF << scalar.width) & 0xFFFFFFFF  # sign-extend into the word
        return [bits]
    return [bits & 0xFFFFFFFF, bits >> 32]


__all__ = ["FunctionBuilder", "ModuleBuilder", "Scalar", "instruction", "string_words"]
