"""Puts the repository root (for the model builders in bench/, shared with the benchmark)
and this folder (for ``model_testing``, the helpers the model tests share) on sys.path:
pytest's importlib mode adds neither."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (str(HERE.parent), str(HERE)):
    if folder not in sys.path:
        sys.path.insert(0, folder)
