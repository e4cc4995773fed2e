"""Op definitions; importing this package registers them all."""

from . import elementwise, nn, reduce, transform  # noqa: F401
