"""``--dim NAME=SIZE``: the size of a named symbolic dimension, for every command that
needs one (compile fixes it in the artifact; run makes random inputs of that size)."""

from __future__ import annotations

import argparse

from tensorsmith.cli._common import CliError

__all__ = ["add_dim_argument", "dim_sizes", "parse_dim", "sized_shape"]


def parse_dim(text: str) -> tuple[str, int]:
    """'batch=8' -> ('batch', 8): the size of a named symbolic dimension of the model."""
    name, sep, value = text.rpartition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"expected NAME=SIZE (for example batch=8), got '{text}'")
    try:
        size = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"the size in --dim {text} is not a whole number") from None
    if size < 1:
        raise argparse.ArgumentTypeError(f"the size in --dim {text} must be >= 1")
    return name, size


def add_dim_argument(p: argparse.ArgumentParser,
                     help: str = "size of a named symbolic dimension of the model's inputs, "
                     "e.g. batch=8 (repeatable); the others stay symbolic") -> None:
    """``--dim NAME=SIZE``, repeatable: one symbolic dimension's size, by its name."""
    p.add_argument(
        "--dim",
        dest="dim",
        metavar="NAME=SIZE",
        action="append",
        type=parse_dim,
        default=[],
        help=help,
    )


def dim_sizes(pairs: list[tuple[str, int]]) -> dict[str, int]:
    """The ``--dim`` values by name; one name given two sizes is an error."""
    sizes: dict[str, int] = {}
    for name, size in pairs:
        if name in sizes and sizes[name] != size:
            raise CliError(f"--dim given twice for '{name}' with different sizes")
        sizes[name] = size
    return sizes


def sized_shape(shape: list[int | str], sizes: dict[str, int], what: str) -> tuple[int, ...]:
    """A shape whose symbolic dims (their text, as an artifact's plan writes them: "batch",
    "seq + 1") are evaluated with ``sizes``; a CliError names the symbols still missing."""
    from tensorsmith.ir.symbolic import evaluate, free_symbols, parse_dim

    dims = [d if isinstance(d, int) else parse_dim(d) for d in shape]
    missing = sorted(free_symbols(dims) - set(sizes))
    if missing:
        example = " ".join(f"--dim {n}=1" for n in missing)
        raise CliError(f"{what} has shape [{', '.join(map(str, shape))}], with sizes known only "
                       f"at run time; give them ({example}) or pass --inputs")
    return tuple(evaluate(d, sizes) for d in dims)
