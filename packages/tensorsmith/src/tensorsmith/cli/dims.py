"""``--dim NAME=SIZE``: the size of a named symbolic dimension, for every command that
needs one (compile fixes it in the artifact; run makes random inputs of that size).
``--dim NAME=LOW..HIGH`` (compile) keeps the size open and sizes the kernels for the top
of that range, the sizes that take the longest (``build(size_hints=...)``)."""

from __future__ import annotations

import argparse

from tensorsmith.cli._common import CliError

__all__ = ["add_dim_argument", "dim_hints", "dim_sizes", "parse_dim", "sized_shape"]

Range = tuple[int, int]


def parse_dim(text: str) -> tuple[str, int | Range]:
    """'batch=8' -> ('batch', 8): the size of a named symbolic dimension of the model;
    'batch=1..64' -> ('batch', (1, 64)): the range of sizes it will see."""
    name, sep, value = text.rpartition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"expected NAME=SIZE or NAME=LOW..HIGH (for example batch=8, batch=1..64), "
            f"got '{text}'")
    low_text, dots, high_text = value.partition("..")
    try:
        sizes = [int(low_text), int(high_text)] if dots else [int(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"the size in --dim {text} is not a whole number (or LOW..HIGH)") from None
    if min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"the size in --dim {text} must be >= 1")
    if dots and sizes[0] > sizes[1]:
        raise argparse.ArgumentTypeError(f"the range in --dim {text} is empty")
    return (name, (sizes[0], sizes[1])) if dots else (name, sizes[0])


def add_dim_argument(p: argparse.ArgumentParser,
                     help: str = "size of a named symbolic dimension of the model's inputs, "
                     "e.g. batch=8, or the range it will see, batch=1..16, which keeps it "
                     "symbolic and sizes the kernels for 16 (repeatable); the others stay "
                     "symbolic") -> None:
    """``--dim NAME=SIZE`` (or ``NAME=LOW..HIGH``), repeatable: one symbolic dimension's
    size, by its name."""
    p.add_argument(
        "--dim",
        dest="dim",
        metavar="NAME=SIZE",
        action="append",
        type=parse_dim,
        default=[],
        help=help,
    )


def dim_sizes(pairs: list[tuple[str, int | Range]], ranges: bool = False) -> dict[str, int]:
    """The ``--dim`` sizes by name; one name given two sizes is an error, and so is a
    range unless ``ranges`` (the command takes them, see :func:`dim_hints`)."""
    sizes: dict[str, int] = {}
    for name, size in pairs:
        if isinstance(size, tuple):
            if not ranges:
                raise CliError(f"--dim {name}={size[0]}..{size[1]}: a range is for compile; "
                               f"give one size here (for example {name}={size[1]})")
            continue
        if name in sizes and sizes[name] != size:
            raise CliError(f"--dim given twice for '{name}' with different sizes")
        sizes[name] = size
    return sizes


def dim_hints(pairs: list[tuple[str, int | Range]]) -> dict[str, int]:
    """The ``--dim`` ranges by name, each as the size the kernels are sized for: the top
    of the range (the largest runs take the longest)."""
    hints: dict[str, int] = {}
    for name, size in pairs:
        if isinstance(size, tuple):
            if name in hints and hints[name] != size[1]:
                raise CliError(f"--dim given twice for '{name}' with different ranges")
            hints[name] = size[1]
    both = sorted(set(hints) & set(dim_sizes(pairs, ranges=True)))
    if both:
        raise CliError(f"--dim gives '{both[0]}' both a size and a range")
    return hints


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
