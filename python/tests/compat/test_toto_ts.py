"""totoc.compat.toto_ts against toto-ts 0.2.0, both called as a toto-ts user calls TotoForecaster.forecast."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TINY_CASES, case, check_samples, context_sigma, within_golden_tolerance


def masked_timeseries(cls, series: np.ndarray, observed: np.ndarray, ids: np.ndarray):
    """A MaskedTimeseries as a toto-ts user builds one: missing points 0 with padding_mask False, ids [..., V, T]."""
    t = series.shape[-1]
    return cls(
        series=torch.from_numpy(np.where(observed, series, 0).astype(np.float32)),
        padding_mask=torch.from_numpy(observed),
        id_mask=torch.from_numpy(np.broadcast_to(ids[..., None], (*ids.shape, t)).astype(np.int32).copy()),
        timestamp_seconds=torch.zeros(series.shape, dtype=torch.int64),
        time_interval_seconds=torch.full(series.shape[:-1], 60, dtype=torch.int64),
    )


def request_arrays(name: str):
    req = case(TINY_CASES, name)["request"]
    target = np.array([[np.nan if x is None else x for x in row] for row in req["target"]], dtype=np.float32)
    ids = np.array(req.get("id_mask") or [0] * len(target))
    return req, target, ~np.isnan(target), ids


@pytest.fixture(scope="module")
def reference(toto_ts_model):
    from toto.inference.forecaster import TotoForecaster

    return TotoForecaster(toto_ts_model.model)


@pytest.fixture(scope="module")
def drop_in(toto1_engine):
    from totoc.compat.toto_ts import TotoForecaster

    return TotoForecaster(toto1_engine)


@pytest.mark.parametrize("name", ["mean_1v", "mean_4v_groups", "mean_short"])
def test_mean_paths_match_toto_ts(reference, drop_in, name):
    from toto.data.util.dataset import MaskedTimeseries
    from toto.inference.forecaster import Forecast

    req, target, observed, ids = request_arrays(name)
    # one series unbatched ([V, T], as toto-ts users pass one), and a batch of it and a shifted copy
    batch = np.stack([target, target * 0.5 + 3.0])
    cases = [
        (target, observed, ids),
        (batch, np.stack([observed, observed]), np.stack([ids, ids[::-1]])),
    ]
    for series, obs, id_ in cases:
        inputs = masked_timeseries(MaskedTimeseries, series, obs, id_)
        theirs = reference.forecast(inputs, prediction_length=req["horizon"], num_samples=None)
        ours = drop_in.forecast(inputs, prediction_length=req["horizon"], num_samples=None)
        assert type(ours) is Forecast and ours.samples is None
        assert ours.mean.dtype == torch.float32 and ours.mean.shape == theirs.mean.shape
        sigma = context_sigma(series.reshape(-1, *series.shape[-2:]), obs.reshape(-1, *obs.shape[-2:]))
        within_golden_tolerance(ours.mean.numpy(), theirs.mean.numpy(), sigma, f"{name} {list(series.shape)}")


def test_float64_inputs_give_float64_outputs(drop_in):
    from totoc.compat.toto_ts import MaskedTimeseries

    req, target, observed, ids = request_arrays("mean_1v")
    inputs = masked_timeseries(MaskedTimeseries, target, observed, ids)
    inputs = inputs._replace(series=inputs.series.to(torch.float64))
    f32 = drop_in.forecast(masked_timeseries(MaskedTimeseries, target, observed, ids), req["horizon"])
    f64 = drop_in.forecast(inputs, req["horizon"])
    assert f64.mean.dtype == torch.float64
    np.testing.assert_allclose(f64.mean.numpy(), f32.mean.numpy(), rtol=1e-5)


@pytest.mark.parametrize("name", ["sampled_256", "sampled_2v"])
def test_sample_paths_pass_the_ks_test_against_toto_ts(reference, drop_in, name):
    from toto.data.util.dataset import MaskedTimeseries

    req, target, observed, ids = request_arrays(name)
    n, h = req["samples"], req["horizon"]
    inputs = masked_timeseries(MaskedTimeseries, target, observed, ids)
    torch.manual_seed(req.get("seed") or 0)
    theirs = reference.forecast(inputs, prediction_length=h, num_samples=n, samples_per_batch=n)
    ours = drop_in.forecast(inputs, prediction_length=h, num_samples=n, samples_per_batch=n)
    assert ours.samples.shape == theirs.samples.shape == (1, len(target), h, n)
    check_samples(ours.samples[0].numpy(), theirs.samples[0].numpy(), name)
    # the derived statistics are toto-ts's own, over the drop-in's paths
    torch.testing.assert_close(ours.mean, ours.samples.mean(dim=-1), rtol=0, atol=0)
    torch.testing.assert_close(ours.quantile(0.9), torch.quantile(ours.samples, 0.9, dim=-1), rtol=0, atol=0)
    torch.testing.assert_close(ours.std, ours.samples.std(dim=-1), rtol=0, atol=0)


def test_seed_comes_from_torch_generator(drop_in):
    from totoc.compat.toto_ts import MaskedTimeseries

    req, target, observed, ids = request_arrays("sampled_2v")
    inputs = masked_timeseries(MaskedTimeseries, target, observed, ids)
    torch.manual_seed(5)
    a = drop_in.forecast(inputs, req["horizon"], num_samples=16).samples
    b = drop_in.forecast(inputs, req["horizon"], num_samples=16).samples
    torch.manual_seed(5)
    c = drop_in.forecast(inputs, req["horizon"], num_samples=16).samples
    assert torch.equal(a, c), "torch.manual_seed does not make the drop-in reproducible"
    assert not torch.equal(a, b), "two calls drew the same paths"
    d = drop_in.forecast(inputs, req["horizon"], num_samples=16, seed=1).samples
    e = drop_in.forecast(inputs, req["horizon"], num_samples=16, seed=1).samples
    assert torch.equal(d, e)


def test_fallback_classes_are_toto_ts_s():
    """The classes shipped for users without toto-ts have toto-ts's fields, defaults and behaviour."""
    from toto.data.util.dataset import MaskedTimeseries as TheirMasked
    from toto.inference.forecaster import Forecast as TheirForecast

    from totoc.compat import toto_ts

    assert toto_ts._MaskedTimeseries._fields == TheirMasked._fields
    assert toto_ts._MaskedTimeseries._field_defaults == TheirMasked._field_defaults
    g = torch.Generator().manual_seed(0)
    samples = torch.randn(2, 3, 5, 33, generator=g)
    ours, theirs = toto_ts._Forecast(samples.mean(-1), samples), TheirForecast(samples.mean(-1), samples)
    for q in (0.1, 0.5, 0.9):
        assert torch.equal(ours.quantile(q), theirs.quantile(q))
    assert torch.equal(ours.quantile(torch.tensor([0.2, 0.7])), theirs.quantile(torch.tensor([0.2, 0.7])))
    assert torch.equal(ours.median, theirs.median) and torch.equal(ours.std, theirs.std)
    # numpy paths: the same numbers
    np_fc = toto_ts._Forecast(samples.mean(-1).numpy(), samples.numpy())
    np.testing.assert_allclose(np_fc.quantile(0.9), theirs.quantile(0.9).numpy(), rtol=1e-6)
    np.testing.assert_allclose(np_fc.std, theirs.std.numpy(), rtol=1e-5)
    mean_only = toto_ts._Forecast(samples.mean(-1))
    for get in (lambda f: f.quantile(0.5), lambda f: f.median, lambda f: f.std):
        with pytest.raises(AssertionError, match="samples must be provided"):
            get(mean_only)
        with pytest.raises(AssertionError, match="samples must be provided"):
            get(TheirForecast(samples.mean(-1)))
    with pytest.raises(Exception):
        ours.mean = None  # frozen


def test_refused_inputs_name_the_problem(drop_in, toto2_engines):
    import totoc
    from totoc.compat.toto_ts import MaskedTimeseries, TotoForecaster

    req, target, observed, ids = request_arrays("mean_4v_groups")
    inputs = masked_timeseries(MaskedTimeseries, target, observed, ids)
    with pytest.raises(totoc.InvalidInput, match="exogenous"):
        drop_in.forecast(inputs._replace(num_exogenous_variables=1), 8)
    with pytest.raises(totoc.InvalidInput, match="exogenous"):
        drop_in.forecast(inputs, 8, future_exogenous_variables=torch.zeros(1, 1, 8))
    varying = inputs.id_mask.clone()
    varying[0, 0] = 7
    with pytest.raises(totoc.InvalidInput, match="changes along time"):
        drop_in.forecast(inputs._replace(id_mask=varying), 8)
    with pytest.raises(totoc.InvalidInput, match="num_samples"):
        drop_in.forecast(inputs, 8, num_samples=0)
    with pytest.raises(totoc.EngineLimit):
        drop_in.forecast(inputs, 10_000)
    with pytest.raises(totoc.InvalidInput, match="toto-2.0"):
        TotoForecaster(toto2_engines[None])
    with pytest.raises(totoc.InvalidInput, match="totoc.Engine"):
        TotoForecaster("engine-dir")


def test_the_ks_check_rejects_a_biased_sampler():
    """The sampled comparison can fail: two halves of toto-ts's recorded paths (the fixture) pass; one half shifted
    by a fifth of the paths' spread, or narrowed to half its spread, is rejected."""
    from conftest import check_samples

    ref = np.array(case(TINY_CASES, "sampled_256")["reference"]["samples"], dtype=np.float64)  # [S, V, H]
    paths = np.moveaxis(ref, 0, -1)  # [V, H, S]
    half = paths.shape[-1] // 2
    a, b = paths[..., :half], paths[..., half:]
    check_samples(a, b, "two halves of toto-ts's paths")
    spread = paths.std(axis=-1, keepdims=True)
    with pytest.raises(AssertionError):
        check_samples(a + 0.2 * spread, b, "shifted")
    with pytest.raises(AssertionError):
        check_samples(a.mean(-1, keepdims=True) + 0.5 * (a - a.mean(-1, keepdims=True)), b, "narrowed")
