"""The ``llvm`` target's options, parsed and checked before LLVM sees them.

``llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -mattr=+dotprod`` names the machine
the artifact runs on. LLVM itself is a poor judge of these strings: a processor or
feature it does not know is reported on stderr and ignored (the code is then silently
compiled for the triple's baseline CPU), and a feature without its ``+``/``-`` sign
aborts the process.
So every option is checked here first and a mistake is a :class:`TargetError` that
names the option, its value and what to write instead. Whether LLVM knows a processor
or feature is asked of LLVM (it answers on stderr, which is captured for the question),
so no list of CPU names is kept here.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import llvmlite.binding as llvm

from tensorsmith.ir.errors import TargetError
from tensorsmith.ir.target import Target, activation_layout

#: Every option an ``llvm`` target takes; ``-layout`` is read by ir/target.py.
OPTIONS = ("mtriple", "mcpu", "mattr", "layout")

#: The processor a foreign triple compiles for when no ``-mcpu`` is given: the host's
#: CPU means nothing there, and LLVM's ``generic`` runs on every CPU of the triple.
FOREIGN_DEFAULT_CPU = "generic"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_TRIPLE = re.compile(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+){1,4}")
_FEATURE = re.compile(r"[+-][A-Za-z0-9][A-Za-z0-9_.-]*")
_UNRECOGNIZED = re.compile(r"'([^']*)' is not a recognized (processor|feature) for this target")
_EXAMPLE = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76"


@dataclass(frozen=True)
class LlvmTarget:
    """What LLVM compiles for: the triple, a processor it knows, and the feature string.

    ``cpu`` and ``attrs`` are resolved: the host build of ``llvm`` names the host CPU and
    its features, so that workers and caches get the same machine as this process.
    ``host`` says the triple is this process's, so the system C compiler links and the
    host's cache sizes apply.
    """

    triple: str
    cpu: str
    attrs: str
    host: bool

    @property
    def arch(self) -> str:
        """LLVM's name of the architecture: ``x86_64``, ``aarch64``, ``arm``..."""
        return str(llvm.get_triple_parts(self.triple).Arch)

    @property
    def native(self) -> bool:
        """Whether the code is for this very CPU (so the host's caches describe it)."""
        return self.host and self.cpu == llvm.get_host_cpu_name()


def llvm_target(target: Target) -> LlvmTarget:
    """``target``'s options as an :class:`LlvmTarget`, or a :class:`TargetError` that
    names the first bad option. Checked once per target string."""
    return _parse(str(target))


def host_target() -> LlvmTarget:
    """Plain ``llvm``: this process's triple and CPU, with all of its features."""
    return _parse("llvm")


@functools.cache
def _parse(text: str) -> LlvmTarget:
    target = Target.parse(text)
    _check_option_names(target)
    activation_layout(target)  # -layout's values are ir/target.py's to check
    triple, host = _triple(target)
    cpu = target.options.get("mcpu", "")
    attrs = target.options.get("mattr", "")
    _check_syntax(target, cpu, attrs)
    if "help" in (cpu, attrs):
        _answer_help(triple, "processors" if cpu == "help" else "features")
    base = ""  # the features that come with the CPU; -mattr's follow and win
    if cpu == "native" or (not cpu and host):
        if not host:
            raise TargetError(
                f"-mcpu=native in target '{target}' means this build host's CPU, not one "
                f"of {triple}; name the CPU the artifact runs on (e.g. '{_EXAMPLE}') "
                f"or leave -mcpu out for LLVM's {FOREIGN_DEFAULT_CPU!r} one"
            )
        resolved_cpu, base = llvm.get_host_cpu_name(), _host_features()
    else:
        resolved_cpu = cpu or FOREIGN_DEFAULT_CPU
    resolved = LlvmTarget(triple, resolved_cpu, ",".join(f for f in (base, attrs) if f), host)
    if cpu not in ("", "native") or attrs:
        _check_known(target, resolved)
    return resolved


def _check_option_names(target: Target) -> None:
    for key, value in target.options.items():
        if key not in OPTIONS:
            close = difflib.get_close_matches(key, OPTIONS, n=1)
            hint = f"did you mean -{close[0]}? " if close else ""
            raise TargetError(
                f"unknown option -{key}={value} in target '{target}'; {hint}the llvm target "
                "takes " + ", ".join(f"-{o}" for o in OPTIONS) + f" (e.g. '{_EXAMPLE}')"
            )


def _triple(target: Target) -> tuple[str, bool]:
    """The triple to compile for and whether it is this process's."""
    from .target_machine import init_llvm

    process = llvm.get_process_triple()
    triple = target.options.get("mtriple", process)
    if _TRIPLE.fullmatch(triple) is None:
        raise TargetError(
            f"-mtriple={triple} in target '{target}' is not a target triple; write "
            "arch-os-abi, e.g. -mtriple=aarch64-linux-gnu or -mtriple=x86_64-linux-gnu"
        )
    parts, own = llvm.get_triple_parts(triple), llvm.get_triple_parts(process)
    host = (parts.Arch, parts.SubArch, parts.OS) == (own.Arch, own.SubArch, own.OS) and (
        parts.Env in ("unknown", own.Env)
    )
    init_llvm(foreign=not host)
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError:
        raise TargetError(
            f"-mtriple={triple} in target '{target}' names no architecture this LLVM "
            f"{'.'.join(map(str, llvm.llvm_version_info))} compiles for; use e.g. "
            "-mtriple=aarch64-linux-gnu or -mtriple=x86_64-linux-gnu"
        ) from None
    if parts.OS != "linux" or parts.ObjectFormat != "ELF":
        raise TargetError(
            f"-mtriple={triple} in target '{target}' is not a Linux triple; a CPU artifact "
            f"is a Linux ELF shared library: use e.g. -mtriple={parts.Arch}-linux-gnu"
        )
    return triple, host


def _check_syntax(target: Target, cpu: str, attrs: str) -> None:
    """What LLVM would abort on, or read as something else: checked as text first."""
    if cpu and _NAME.fullmatch(cpu) is None:
        raise TargetError(
            f"-mcpu={cpu} in target '{target}' is not a processor name; use a name such as "
            "-mcpu=cortex-a76 or -mcpu=x86-64-v3, or leave -mcpu out"
        )
    if (
        attrs != "help"
        and "mattr" in target.options
        and not all(_FEATURE.fullmatch(f) for f in attrs.split(","))
    ):
        raise TargetError(
            f"-mattr={attrs} in target '{target}' is not a feature list; write features as "
            "+name to enable or -name to disable, comma-separated without spaces, e.g. "
            "-mattr=+avx2,-avx512f (-mattr=help lists the triple's features)"
        )


def _check_known(target: Target, resolved: LlvmTarget) -> None:
    """Ask LLVM whether it knows the processor and features; name the first it does
    not, with the closest names it does know."""
    triple = resolved.triple
    for name, kind in _unrecognized(resolved):
        cpus, features = _known_names(triple)
        if kind == "processor":
            raise TargetError(
                f"-mcpu={name} in target '{target}': LLVM knows no processor {name!r} for "
                f"{triple}; {_closest(name, cpus)}-mcpu=help lists every one it knows"
            )
        feature = name.lstrip("+-")
        raise TargetError(
            f"-mattr={target.options.get('mattr', '')} in target '{target}': LLVM knows no "
            f"feature {feature!r} for {triple}; {_closest(feature, features)}leave it out; "
            "-mattr=help lists every one it knows"
        )


def _answer_help(triple: str, what: str) -> None:
    """``-mcpu=help`` / ``-mattr=help``: the names LLVM knows, as the error's message (a
    target that asks for help compiles nothing)."""
    cpus, features = _known_names(triple)
    names, option = (cpus, "-mcpu=NAME") if what == "processors" else (features, "-mattr=+NAME")
    raise TargetError(
        f"{what} LLVM knows for {triple} (use one as {option}): "
        + (", ".join(names) or "none listed")
    )


def _closest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3)
    return f"did you mean {', '.join(close)}? " if close else ""


_STDERR_LOCK = threading.Lock()


def _unrecognized(resolved: LlvmTarget) -> list[tuple[str, str]]:
    """(name, "processor" | "feature") that LLVM reported it does not recognize while
    making the target machine: LLVM prints those on stderr and goes on without them."""
    from .target_machine import target_machine

    with _stderr_captured() as lines:
        target_machine(resolved)
    found, other = [], []
    for line in lines:
        m = _UNRECOGNIZED.search(line)
        if m is None:
            other.append(line)
        elif (m.group(1), m.group(2)) not in found:
            found.append((m.group(1), m.group(2)))
    if other:  # whatever else was written meanwhile belongs to someone: pass it on
        print("\n".join(other), file=sys.stderr)
    if found:
        target_machine.cache_clear()  # never hand out a machine that ignored a name
    return found


@contextmanager
def _stderr_captured() -> Iterator[list[str]]:
    """The lines written to file descriptor 2 meanwhile (LLVM writes there directly, not
    through Python's sys.stderr), in the list yielded, once the block is done."""
    lines: list[str] = []
    with _STDERR_LOCK, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines += sink.read().decode(errors="replace").splitlines()


@functools.cache
def _known_names(triple: str) -> tuple[list[str], list[str]]:
    """The processors and features LLVM lists for ``triple`` (its ``-mcpu=help``), for the
    hints of an error. Asked of a new process: LLVM prints that list once per process."""
    code = (
        "import sys, llvmlite.binding as l; l.initialize_all_targets(); "
        "l.Target.from_triple(sys.argv[1]).create_target_machine(cpu='help')"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, triple],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return [], []
    sections: dict[str, list[str]] = {"CPUs": [], "features": []}
    current: list[str] | None = None
    for line in done.stderr.splitlines():
        heading = re.match(r"Available (CPUs|features) for this target:", line)
        if heading:
            current = sections[heading.group(1)]
        elif current is not None and (m := re.match(r"\s+(\S+)\s+- ", line)):
            current.append(m.group(1))
    return sections["CPUs"], sections["features"]


def _host_features() -> str:
    return str(llvm.get_host_cpu_features().flatten())
