"""The float32 multiply-add peak of this CPU, measured: the ceiling of any schedule.

JIT-compiles (llvmlite, for the host CPU) a loop of independent vector FMA chains, enough
to cover the FMA latency, and runs it on 1 and N threads at once. A kernel's GFLOP/s over
this number is its share of the machine; a matrix product near it has nothing left for
a schedule to win.

    python bench/fma_peak.py --threads 2
"""

from __future__ import annotations

import argparse
import ctypes
import threading
import time

import llvmlite.binding as llvm

CHAINS = 12  # independent accumulators: more than FMA latency x issue width


def host_lanes() -> int:
    """float32 lanes of one vector register of this CPU, as the codegen plug-in sees it:
    each chain must be one register (12 chains of 16 lanes are 24 ymm on AVX2, which has
    16, and the spills made the "peak" half the real one)."""
    from tensorsmith.ir.codegen import target_resources
    from tensorsmith.ir.target import Target

    return target_resources(Target.parse("llvm")).lanes(4)


def _ir(lanes: int) -> str:
    vec = f"<{lanes} x float>"
    body = [f"  %a{i}.next = call {vec} @llvm.fma.v{lanes}f32({vec} %a{i}, {vec} %x, {vec} %y)"
            for i in range(CHAINS)]
    phis = [f"  %a{i} = phi {vec} [ %x, %entry ], [ %a{i}.next, %loop ]" for i in range(CHAINS)]
    total = "  %s0 = fadd " + vec + " %a0.next, %a1.next\n" + "\n".join(
        f"  %s{i - 1} = fadd {vec} %s{i - 2}, %a{i}.next" for i in range(2, CHAINS))
    return f"""
declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})
define float @spin(i64 %n) {{
entry:
  %x = insertelement {vec} zeroinitializer, float 1.0, i32 0
  %y = insertelement {vec} zeroinitializer, float 0.5, i32 0
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k.next, %loop ]
{chr(10).join(phis)}
{chr(10).join(body)}
  %k.next = add i64 %k, 1
  %done = icmp eq i64 %k.next, %n
  br i1 %done, label %exit, label %loop
exit:
{total}
  %r = extractelement {vec} %s{CHAINS - 2}, i32 0
  ret float %r
}}
"""


def peak_gflops(threads: int, lanes: int = 0, iterations: int = 20_000_000) -> float:
    lanes = lanes or host_lanes()
    # Its own target machine, not codegen/llvm's cached one: the JIT engine takes
    # ownership of the machine it is given and frees it with the engine.
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                      features=llvm.get_host_cpu_features().flatten(), opt=3)
    mod = llvm.parse_assembly(_ir(lanes))
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    spin = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("spin"))
    spin(1000)
    workers = [threading.Thread(target=spin, args=(iterations,)) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - start
    return threads * iterations * CHAINS * lanes * 2 / seconds / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for n in sorted({1, args.threads}):
        print(f"{n} thread{'s' if n > 1 else ''}: {peak_gflops(n):.1f} GFLOP/s float32 FMA peak")


if __name__ == "__main__":
    main()
