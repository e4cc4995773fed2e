"""``tensorsmith``: the command line of the tensorsmith compiler.

Exit codes: 0 success; 2 a user-facing error (a TensorsmithError, a missing or
unreadable file, a bad argument), printed as ``error: <message>`` without a
traceback; 1 anything else, which is a bug in tensorsmith; 3 ``tensorsmith compare``
found an output that diverges from ONNX Runtime's.

Heavy modules (onnx, llvmlite, the compiler itself) are imported inside the
subcommands so that ``tensorsmith --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata

from tensorsmith.cli import (
    compare_cmd,
    compile_cmd,
    devices_cmd,
    inspect_cmd,
    quantize_cmd,
    run_cmd,
    tune_cmd,
)
from tensorsmith.cli._common import CliError

PROG = "tensorsmith"

EPILOG = """\
examples:
  tensorsmith compile examples/mlp.onnx --target llvm --input-shape input:1,784 -o mlp.so
  tensorsmith run mlp.so --device cpu --repeat 20
  tensorsmith run mlp.so --inputs inputs.npz --outputs outputs.npz
  tensorsmith run mlp.so --profile --trace mlp.trace.json
  tensorsmith inspect mlp.so
  tensorsmith compare examples/mlp.onnx --input-shape input:1,784
  tensorsmith quantize model.onnx --calib calib.npz -o model.int8.onnx

Run 'tensorsmith COMMAND --help' for the options of one command.

exit status: 0 success, 2 a user error (printed as 'error: ...'), 1 an internal error (a
bug: please report it; --verbose prints the traceback), 3 'compare' found a divergence.
"""

BUG_HINT = "this is a bug in tensorsmith; please report it with the command you ran"


def installed_versions() -> list[tuple[str, str]]:
    """(name, version) of every installed distribution whose name starts with 'tensorsmith'."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        if name.lower().replace("_", "-").startswith("tensorsmith"):
            found.setdefault(name.lower().replace("_", "-"), dist.version)
    # the full stack first, then its parts in alphabetical order
    return sorted(found.items(), key=lambda item: (item[0] != "tensorsmith", item[0]))


class _VersionAction(argparse.Action):
    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(
            option_strings=option_strings, dest=dest, default=default, nargs=0, help=help
        )

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        versions = installed_versions()
        if not versions:
            print("tensorsmith (no installed tensorsmith distribution found)")
        for name, version in versions:
            print(f"{name} {version}")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="tensorsmith compiles ONNX models to native code for CPU (LLVM), "
        "Vulkan (SPIR-V) and OpenCL, and runs the compiled artifacts.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the versions of the installed tensorsmith distributions",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False,
        help="more output; on an internal error, print the traceback",
    )

    # --verbose is accepted after the subcommand too; SUPPRESS keeps the subparser from
    # overwriting a --verbose given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="more output; on an internal error, print the traceback",
    )

    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    sub.required = True
    compile_cmd.add_parser(sub, [common])
    run_cmd.add_parser(sub, [common])
    tune_cmd.add_parser(sub, [common])
    inspect_cmd.add_parser(sub, [common])
    compare_cmd.add_parser(sub, [common])
    quantize_cmd.add_parser(sub, [common])
    devices_cmd.add_parser(sub, [common])
    return parser


def _tensorsmith_error_types() -> tuple[type[BaseException], ...]:
    try:
        from tensorsmith.runtime.errors import TensorsmithError
    except Exception:  # the runtime is a dependency; stay usable if it is broken
        return ()
    return (TensorsmithError,)


# OS errors that are about the user's files, not about tensorsmith
_USER_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 itself on bad arguments
    verbose = bool(getattr(args, "verbose", False))
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tensorsmith run ... | head`
        return 0
    except Exception as exc:
        if isinstance(exc, (CliError, *_USER_OS_ERRORS, *_tensorsmith_error_types())):
            if verbose:
                traceback.print_exc()
            message = str(exc) or type(exc).__name__
            print(f"error: {message}", file=sys.stderr)
            return 2
        if verbose:
            traceback.print_exc()
        print(f"internal error: {exc!r}", file=sys.stderr)
        print(BUG_HINT + ("" if verbose else " (add --verbose for the traceback)"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
