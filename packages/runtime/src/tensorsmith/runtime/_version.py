"""The version of tensorsmith-runtime, kept apart so error messages can name it cheaply.

It is also the version of every tensorsmith distribution, and this line is the only place
it is written: each package's pyproject.toml reads it (hatch's version source), each
package's ``__version__`` falls back to it when running from a source tree, and the exact
pins between the distributions (``tensorsmith-ir==...``) must equal it, which
tests/test_packaging.py checks. To release a new version, change it here and the pins.
"""

__version__ = "0.1.0"
