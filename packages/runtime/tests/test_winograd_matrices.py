"""The Winograd matrices compute correlations, and the weight transform is theirs."""

from __future__ import annotations

import numpy as np
import pytest

from tensorsmith.runtime.layouts import to_stored
from tensorsmith.runtime.winograd import TRANSFORMS, transform_weight, transformed_shape


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_one_dimensional_minimal_filtering(name: str) -> None:
    w = TRANSFORMS[name]
    rng = np.random.default_rng(0)
    d, g = rng.standard_normal(w.alpha), rng.standard_normal(w.r)
    got = np.array(w.at) @ ((np.array(w.g) @ g) * (np.array(w.bt) @ d))
    want = np.correlate(d, g, mode="valid")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_two_dimensional_tile(name: str) -> None:
    """One output tile of a 3x3 convolution from the transformed weight and input."""
    w = TRANSFORMS[name]
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((4, 3, 3, 3))
    patch = rng.standard_normal((3, w.alpha, w.alpha))
    u = transform_weight(weight, name)
    assert u.shape == transformed_shape(weight.shape, name) == (w.alpha, w.alpha, 3, 4)
    bt, at = np.array(w.bt), np.array(w.at)
    v = np.einsum("ei,cij,nj->enc", bt, patch, bt)
    m = np.einsum("enco,enc->oen", u, v)
    got = np.einsum("ye,oen,xn->oyx", at, m, at)
    want = np.zeros((4, w.m, w.m))
    for y in range(w.m):
        for x in range(w.m):
            want[:, y, x] = np.einsum("ocij,cij->o", weight, patch[:, y:y + 3, x:x + 3])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_layouts_apply_the_transform_first() -> None:
    weight = np.random.default_rng(2).standard_normal((8, 2, 3, 3)).astype("float32")
    stored = to_stored(weight, order=[0, 1, 3, 2], transform="winograd_f2_3")
    assert stored.dtype == np.float32 and stored.shape == (4, 4, 8, 2)
    np.testing.assert_array_equal(stored, transform_weight(weight, "winograd_f2_3")
                                  .transpose(0, 1, 3, 2))
    with pytest.raises(ValueError, match="3x3"):
        transform_weight(np.zeros((2, 2, 5, 5), "float32"), "winograd_f2_3")
