"""Puts this folder on sys.path so tests can import the shared helpers: the module
``frontend_onnx_testing`` and the package ``onnx_conformance`` (the ONNX node-test
harness, kept out of the wheel); uniquely named because every package's tests share one
pytest session."""

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
