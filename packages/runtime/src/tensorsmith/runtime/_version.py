"""The version of tensorsmith-runtime, kept apart so error messages can name it cheaply."""

__version__ = "0.1.0"
