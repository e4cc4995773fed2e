"""Puts this folder on sys.path so tests can import the shared helpers
(``spirv_testing``, ``manifest_host``: uniquely named because every package's tests share
one pytest session), and provides the seeded generator the tests draw inputs from."""

import sys
from pathlib import Path

import numpy as np
import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(2)
