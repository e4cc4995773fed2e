"""Op definitions; importing this package registers them all."""

from . import (  # noqa: F401
    argreduce,
    concat,
    conv,
    elementwise,
    expand,
    gather,
    nn,
    pad,
    reduce,
    scan,
    scatter,
    slice,
    sort,
    transform,
    trig,
)
