"""Op definitions; importing this package registers them all."""

from . import (  # noqa: F401
    argreduce,
    concat,
    conv,
    detection,
    einsum,
    elementwise,
    expand,
    gather,
    grid_sample,
    integer,
    nn,
    pad,
    reduce,
    scan,
    scatter,
    slice,
    sort,
    transform,
    trig,
    unique,
)
