"""Puts this folder on sys.path so tests can import the shared helpers module
``quantize_models`` (uniquely named: every package's tests share one pytest session)."""

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
