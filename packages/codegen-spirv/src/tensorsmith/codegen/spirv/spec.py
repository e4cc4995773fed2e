"""The subset of the SPIR-V specification the emitter uses: opcodes and enumerants.

Numbers come from the SPIR-V 1.3 unified specification (and GLSL.std.450 for the
extended instructions). Only what the emitter writes is listed, so an unknown name is a
KeyError at emit time rather than a silently wrong binary.
"""

from __future__ import annotations

MAGIC = 0x07230203
VERSION_1_3 = 0x00010300
#: From 1.4 on an entry point's interface lists every global variable it uses.
VERSION_1_4 = 0x00010400
#: What SPV_NV_cooperative_matrix2 (matrices a workgroup holds) requires.
VERSION_1_6 = 0x00010600
#: SPIR-V version -> the Vulkan version whose spirv-val environment accepts it.
VULKAN_OF_VERSION = {VERSION_1_3: "vulkan1.1", VERSION_1_6: "vulkan1.3"}
#: Generator magic: 0 is "unregistered"; the low half is our own version of the emitter.
GENERATOR = 0

OP = {
    "Name": 5, "MemberName": 6, "Extension": 10, "ExtInstImport": 11, "ExtInst": 12,
    "MemoryModel": 14, "EntryPoint": 15, "ExecutionMode": 16, "Capability": 17,
    "TypeVoid": 19, "TypeBool": 20, "TypeInt": 21, "TypeFloat": 22, "TypeVector": 23,
    "TypeArray": 28, "TypeRuntimeArray": 29, "TypeStruct": 30, "TypePointer": 32,
    "TypeFunction": 33, "ConstantTrue": 41, "ConstantFalse": 42, "Constant": 43,
    "Function": 54, "FunctionEnd": 56, "Variable": 59, "Load": 61, "Store": 62,
    "AccessChain": 65, "Decorate": 71, "MemberDecorate": 72, "CompositeExtract": 81,
    "ConvertFToU": 109, "ConvertFToS": 110, "ConvertSToF": 111, "ConvertUToF": 112,
    "UConvert": 113, "SConvert": 114, "FConvert": 115, "Bitcast": 124,
    "SNegate": 126, "FNegate": 127, "IAdd": 128, "FAdd": 129, "ISub": 130, "FSub": 131,
    "IMul": 132, "FMul": 133, "UDiv": 134, "SDiv": 135, "FDiv": 136, "UMod": 137,
    "SRem": 138, "SMod": 139, "FRem": 140, "FMod": 141, "IsNan": 156, "IsInf": 157,
    "LogicalEqual": 164, "LogicalNotEqual": 165, "LogicalOr": 166, "LogicalAnd": 167,
    "LogicalNot": 168, "Select": 169, "IEqual": 170, "INotEqual": 171,
    "UGreaterThan": 172, "SGreaterThan": 173, "UGreaterThanEqual": 174,
    "SGreaterThanEqual": 175, "ULessThan": 176, "SLessThan": 177, "ULessThanEqual": 178,
    "SLessThanEqual": 179, "FOrdEqual": 180, "FUnordEqual": 181, "FOrdNotEqual": 182,
    "FUnordNotEqual": 183, "FOrdLessThan": 184, "FUnordLessThan": 185,
    "FOrdGreaterThan": 186, "FUnordGreaterThan": 187, "FOrdLessThanEqual": 188,
    "FUnordLessThanEqual": 189, "FOrdGreaterThanEqual": 190,
    "FUnordGreaterThanEqual": 191, "ShiftRightLogical": 194, "ShiftRightArithmetic": 195,
    "ShiftLeftLogical": 196, "BitwiseOr": 197, "BitwiseXor": 198, "BitwiseAnd": 199,
    "Not": 200, "ControlBarrier": 224, "Phi": 245, "LoopMerge": 246, "SelectionMerge": 247,
    "Label": 248, "Branch": 249, "BranchConditional": 250, "Return": 253,
    "CompositeConstruct": 80,
    # SPV_KHR_cooperative_matrix
    "TypeCooperativeMatrixKHR": 4456, "CooperativeMatrixLoadKHR": 4457,
    "CooperativeMatrixStoreKHR": 4458, "CooperativeMatrixMulAddKHR": 4459,
    # SPV_KHR_integer_dot_product
    "SDot": 4450, "UDot": 4451, "SUDot": 4452,
}

CAPABILITY = {
    "Shader": 1, "Float16": 9, "Float64": 10, "Int64": 11, "Int16": 22, "Int8": 39,
    "StorageBuffer16BitAccess": 4433, "StorageBuffer8BitAccess": 4448,
    "VulkanMemoryModel": 5345, "CooperativeMatrixKHR": 6022,
    "DotProductInput4x8BitPacked": 6018, "DotProduct": 6019,
}
#: SPIR-V 1.3 has 16-bit storage in core; 8-bit storage became core only in 1.5, the
#: Vulkan memory model in 1.5; cooperative matrices are an extension in every version.
EXTENSION_OF = {"StorageBuffer8BitAccess": "SPV_KHR_8bit_storage",
                "VulkanMemoryModel": "SPV_KHR_vulkan_memory_model",
                "CooperativeMatrixKHR": "SPV_KHR_cooperative_matrix",
                "DotProduct": "SPV_KHR_integer_dot_product",
                "DotProductInput4x8BitPacked": "SPV_KHR_integer_dot_product"}
#: The extension of cooperative matrices of Workgroup scope (no capability of its own).
WORKGROUP_MATRIX_EXTENSION = "SPV_NV_cooperative_matrix2"

#: The dot instructions' operand for two 32-bit words of four 8-bit components each.
PACKED_VECTOR_FORMAT_4X8BIT = 0

ADDRESSING_LOGICAL = 0
MEMORY_MODEL_GLSL450 = 1
#: Required where cooperative matrices are used (SPV_KHR_cooperative_matrix, in a Shader).
MEMORY_MODEL_VULKAN = 3
EXECUTION_MODEL_GLCOMPUTE = 5
EXECUTION_MODE_LOCAL_SIZE = 17

STORAGE = {"Input": 1, "Uniform": 2, "Workgroup": 4, "Private": 6, "Function": 7,
           "StorageBuffer": 12}

DECORATION = {"Block": 2, "ArrayStride": 6, "BuiltIn": 11, "Restrict": 19,
              "NonWritable": 24, "Binding": 33, "DescriptorSet": 34, "Offset": 35}

BUILTIN = {"NumWorkgroups": 24, "WorkgroupId": 26, "LocalInvocationId": 27,
           "GlobalInvocationId": 28}

SCOPE_WORKGROUP = 2
SCOPE_SUBGROUP = 3
#: Cooperative matrix uses (OpTypeCooperativeMatrixKHR's Use operand) and layouts.
MATRIX_USE = {"a": 0, "b": 1, "accumulator": 2}
MATRIX_LAYOUT_ROW_MAJOR = 0
#: AcquireRelease | WorkgroupMemory: what a GLSL barrier() means for shared memory.
SEMANTICS_WORKGROUP_ACQREL = 0x8 | 0x100
#: MakeAvailable | MakeVisible: added under the Vulkan memory model, where a barrier makes
#: shared writes available and visible only when its semantics say so.
SEMANTICS_MAKE_AVAILABLE_VISIBLE = 0x2000 | 0x4000
#: Memory operands of shared-memory accesses under the Vulkan memory model: non-private
#: (ordered by the barriers between invocations), made available (stores) or visible
#: (loads) to the workgroup; each is followed by the Workgroup scope id.
MEMORY_ACCESS_SHARED_STORE = 0x8 | 0x20  # MakePointerAvailable | NonPrivatePointer
MEMORY_ACCESS_SHARED_LOAD = 0x10 | 0x20  # MakePointerVisible | NonPrivatePointer
#: Aligned: followed by a literal, the bytes the pointer is aligned to.
MEMORY_ACCESS_ALIGNED = 0x2

LOOP_CONTROL = {"None": 0, "Unroll": 1, "DontUnroll": 2}
SELECTION_CONTROL_NONE = 0
FUNCTION_CONTROL_NONE = 0

#: GLSL.std.450 extended instruction numbers.
GLSL = {
    "Round": 1, "RoundEven": 2, "Trunc": 3, "FAbs": 4, "SAbs": 5, "FSign": 6, "SSign": 7,
    "Floor": 8, "Ceil": 9, "Fract": 10, "Sin": 13, "Cos": 14, "Tan": 15, "Asin": 16,
    "Acos": 17, "Atan": 18, "Sinh": 19, "Cosh": 20, "Tanh": 21, "Asinh": 22, "Acosh": 23,
    "Atanh": 24, "Atan2": 25, "Pow": 26, "Exp": 27, "Log": 28, "Exp2": 29, "Log2": 30,
    "Sqrt": 31, "InverseSqrt": 32, "FMin": 37, "UMin": 38, "SMin": 39, "FMax": 40,
    "UMax": 41, "SMax": 42, "FClamp": 43, "FMix": 46, "Fma": 50, "NMin": 79, "NMax": 80,
}
