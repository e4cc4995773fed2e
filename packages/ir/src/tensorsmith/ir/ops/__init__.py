"""Op definitions; importing this package registers them all."""

from . import concat, conv, elementwise, expand, gather, nn, pad, reduce, slice, transform  # noqa: F401
