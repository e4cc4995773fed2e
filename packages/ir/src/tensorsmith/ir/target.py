"""Targets: what to compile for, parsed from strings like ``"llvm -mcpu=znver4"``."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import TargetError

KINDS = ("llvm", "vulkan", "opencl")
#: Which distribution provides each target's codegen (named in "not installed" errors).
PROVIDERS = {"llvm": "tensorsmith-codegen-llvm", "vulkan": "tensorsmith-codegen-spirv",
             "opencl": "tensorsmith-codegen-opencl"}


@dataclass(frozen=True)
class Target:
    kind: str
    options: dict[str, str] = field(default_factory=dict, hash=False)

    @staticmethod
    def parse(text: str | Target) -> Target:
        if isinstance(text, Target):
            return text
        parts = str(text).split()
        if not parts:
            raise TargetError("empty target string; use one of " + ", ".join(KINDS))
        kind = parts[0]
        if kind not in KINDS:
            raise TargetError(f"unknown target {kind!r}; use one of {', '.join(KINDS)}")
        options: dict[str, str] = {}
        for p in parts[1:]:
            if not p.startswith("-"):
                raise TargetError(f"target option {p!r} must look like -key=value")
            key, _, value = p.lstrip("-").partition("=")
            options[key] = value or "1"
        return Target(kind, options)

    @property
    def family(self) -> str:
        return "cpu" if self.kind == "llvm" else "gpu"

    def __str__(self) -> str:
        return " ".join([self.kind, *(f"-{k}={v}" for k, v in self.options.items())])
