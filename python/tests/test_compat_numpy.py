"""totoc.compat without torch or toto-ts (this venv has neither): numpy in, numpy out, the shipped MaskedTimeseries
and Forecast, and the same numbers as Engine.forecast. The comparisons with toto-ts and toto-2 themselves are in
tests/compat (run in the venv layered over the reference venv)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import CASES


def test_without_torch_the_drop_in_speaks_numpy(engine):
    from totoc.compat import toto_ts

    assert toto_ts.torch is None, "this venv has torch: the numpy path is not what runs"
    assert toto_ts.MaskedTimeseries is toto_ts._MaskedTimeseries and toto_ts.Forecast is toto_ts._Forecast
    req = json.loads((CASES / "sampled_2v.json").read_text())["request"]
    y = np.array([[np.nan if x is None else x for x in row] for row in req["target"]], dtype=np.float32)
    v, t = y.shape
    inputs = toto_ts.MaskedTimeseries(
        series=np.nan_to_num(y), padding_mask=~np.isnan(y), id_mask=np.zeros((v, t), dtype=np.int32),
        timestamp_seconds=np.zeros((v, t), dtype=np.int64), time_interval_seconds=np.full(v, 60),
    )
    fc = toto_ts.TotoForecaster(engine)
    mean = fc.forecast(inputs, 16)
    assert isinstance(mean.mean, np.ndarray) and mean.mean.shape == (1, v, 16) and mean.samples is None
    np.testing.assert_array_equal(mean.mean[0], engine.forecast(y, 16).mean)
    with pytest.raises(AssertionError, match="samples must be provided"):
        mean.median
    sampled = fc.forecast(inputs, 16, num_samples=32, seed=4)
    paths = engine.forecast(y, 16, samples=32, seed=4).samples  # [S, V, H]
    np.testing.assert_array_equal(sampled.samples[0], np.moveaxis(paths, 0, -1))
    np.testing.assert_allclose(sampled.mean[0], paths.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(sampled.quantile(0.9)[0], np.quantile(paths, 0.9, axis=0), rtol=1e-6)
    np.testing.assert_allclose(sampled.std[0], paths.std(axis=0, ddof=1), rtol=1e-5)
    # without torch, the seed comes from numpy's global generator
    np.random.seed(3)
    a = fc.forecast(inputs, 16, num_samples=8).samples
    np.random.seed(3)
    assert np.array_equal(a, fc.forecast(inputs, 16, num_samples=8).samples)
