"""Engine.forecast against `totoc forecast` on the same requests: equal bit for bit, one series and many."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import CASES, as_json_target, cli_forecast, f32


def case(name: str) -> dict:
    return json.loads((CASES / f"{name}.json").read_text())["request"]


def target_of(req: dict) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in req["target"]], dtype=np.float32)


def assert_same(resp: dict, point: np.ndarray, quantiles, levels, samples, truncated: bool) -> None:
    """One CLI response against one series' slices of a Forecast, exactly."""
    np.testing.assert_array_equal(point, f32(resp["mean"]), strict=True)
    if resp["quantiles"]:
        assert [q["q"] for q in resp["quantiles"]] == list(levels)
        for i, q in enumerate(resp["quantiles"]):
            np.testing.assert_array_equal(quantiles[i], f32(q["values"]), strict=True)
    else:
        assert quantiles is None
    if resp["samples"] is not None:
        np.testing.assert_array_equal(samples, f32(resp["samples"]), strict=True)
    else:
        assert samples is None
    assert truncated == ("context_truncated" in resp)


@pytest.mark.parametrize("name", ["mean_1v", "mean_4v_groups", "mean_short", "sampled_256", "sampled_2v"])
def test_one_series_equals_the_cli_bit_for_bit(engine, engine_dir, ort_lib, tmp_path, name):
    req = case(name)
    [resp] = cli_forecast(engine_dir, ort_lib, [req], tmp_path)
    f = engine.forecast(
        target_of(req),
        req["horizon"],
        samples=req["samples"],
        quantiles=req["quantiles"] if req["samples"] else None,
        seed=req["seed"],
        id_mask=req.get("id_mask"),
    )
    assert f.mean.shape == (len(req["target"]), req["horizon"])
    assert f.median is None and f.point is f.mean
    if req["samples"]:
        assert f.samples.shape == (req["samples"], len(req["target"]), req["horizon"])
        assert f.quantiles.shape == (3, len(req["target"]), req["horizon"])
    assert_same(resp, f.mean, f.quantiles, f.quantile_levels, f.samples, bool(f.context_truncated))
    assert f.engine == resp["engine"]


def test_many_series_equal_the_cli_bit_for_bit(engine, engine_dir, ort_lib, tmp_path):
    """A ragged list (1 to 4 variates, 7 to 300 points, missing points, a context cut) in one call."""
    rng = np.random.default_rng(3)
    series = [
        target_of(case("mean_1v")),
        target_of(case("mean_4v_groups")),
        target_of(case("mean_short")),
        (50 + np.cumsum(rng.normal(size=(2, 300)), axis=1)).astype(np.float32),  # longer than max_context 256
        target_of(case("sampled_2v")),
    ]
    series[3][1, ::7] = np.nan
    series[0][0, 10:20] = np.nan
    masks = [None, [0, 0, 1, 1], [0, 1], None, None]
    reqs = [{"target": as_json_target(s), "horizon": 40, **({"id_mask": m} if m else {})} for s, m in zip(series, masks)]
    resps = cli_forecast(engine_dir, ort_lib, reqs, tmp_path)
    f = engine.forecast(series, 40, id_mask=masks)
    n = len(series)
    assert f.mean.shape == (n, 4, 40)
    assert f.quantiles is None and f.samples is None and f.quantile_levels.shape == (0,)
    assert f.context_truncated.tolist() == [False, False, False, True, False]
    assert f.context_used.tolist() == [100, 90, 7, 256, 64]
    for i, (s, resp) in enumerate(zip(series, resps)):
        vi = s.shape[0]
        assert_same(resp, f.mean[i, :vi], None, [], None, bool(f.context_truncated[i]))
        # the variates a series does not have are NaN
        assert np.isnan(f.mean[i, vi:]).all()


def test_many_sampled_series_equal_the_cli_bit_for_bit(engine, engine_dir, ort_lib, tmp_path):
    """[N, V, T] with sample paths and quantiles, then a ragged list of sampled series, each in one call."""
    x = (20 + np.cumsum(np.random.default_rng(7).normal(size=(3, 2, 100)), axis=2)).astype(np.float32)
    x[1, 0, 40:60] = np.nan
    kw = dict(samples=16, quantiles=[0.25, 0.5, 0.75], seed=5)
    for series in (x, [target_of(case("sampled_256")), target_of(case("sampled_2v")), x[2, :1, 30:]]):
        reqs = [{"target": as_json_target(s), "horizon": 24, **kw} for s in series]
        resps = cli_forecast(engine_dir, ort_lib, reqs, tmp_path)
        f = engine.forecast(series, 24, **kw)
        n = len(series)
        assert f.mean.shape == (n, 2, 24)
        assert f.quantiles.shape == (3, n, 2, 24)
        assert f.samples.shape == (n, 16, 2, 24)
        np.testing.assert_array_equal(f.quantile_levels, [0.25, 0.5, 0.75], strict=True)
        for i, (s, resp) in enumerate(zip(series, resps)):
            vi = s.shape[0]
            assert resp["samples"] is not None and len(resp["quantiles"]) == 3  # compared below
            assert_same(resp, f.mean[i, :vi], f.quantiles[:, i, :vi], f.quantile_levels, f.samples[i, :, :vi],
                        bool(f.context_truncated[i]))


def test_an_n_v_t_array_equals_the_same_series_as_a_list(engine):
    x = (20 + np.cumsum(np.random.default_rng(1).normal(size=(3, 2, 80)), axis=2)).astype(np.float32)
    a = engine.forecast(x, 16, samples=8, seed=2)
    b = engine.forecast(list(x), 16, samples=8, seed=2)
    for name in ("mean", "quantiles", "samples"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), strict=True)
    # float64, non-contiguous input reads the same values
    c = engine.forecast(np.asfortranarray(x.astype(np.float64)), 16, samples=8, seed=2)
    np.testing.assert_array_equal(a.mean, c.mean, strict=True)
    # integers are converted; nested lists with None for missing points too
    ints = engine.forecast(np.arange(40).reshape(1, 40), 8)
    floats = engine.forecast(np.arange(40, dtype=np.float32).reshape(1, 40), 8)
    np.testing.assert_array_equal(ints.mean, floats.mean, strict=True)
    listed = engine.forecast([[1.0, None, 3.0, 4.0]], 4)
    arr = engine.forecast(np.array([[1.0, np.nan, 3.0, 4.0]], dtype=np.float32), 4)
    np.testing.assert_array_equal(listed.mean, arr.mean, strict=True)


def test_a_context_cut_and_strict_context(engine, totoc_module):
    long = np.linspace(0, 10, 400, dtype=np.float32)[None]
    f = engine.forecast(long, 8)
    assert f.context_truncated is True and f.context_used == 256
    np.testing.assert_array_equal(f.mean, engine.forecast(long[:, -256:], 8).mean, strict=True)
    with pytest.raises(totoc_module.EngineLimit, match="the context has 400 points but this engine holds 256"):
        engine.forecast(long, 8, strict_context=True)


def test_info(engine, engine_dir):
    info = engine.info
    assert info["family"] == "toto-1.0" and info["point_forecast"] == "mean" and info["samples"] is True
    assert (info["max_variates"], info["max_context"], info["max_horizon"], info["max_samples"]) == (4, 256, 160, 256)
    assert info["precision"] == "fp32" and info["target"] == "cpu"
    assert [p["name"] for p in info["profiles"]] == ["small", "sampled"]
    assert info["profiles"][1] == {"name": "sampled", "batch": 1, "variates": 2, "context": 128, "horizon": 64,
                                   "samples": 256, "decode_block": None}
    assert info["path"] == str(engine_dir)
    info["family"] = "changed"  # a copy
    assert engine.info["family"] == "toto-1.0"


def test_close_and_context_manager(totoc_module, engine_dir):
    with totoc_module.Engine(engine_dir) as eng:
        assert not eng.closed
        assert eng.forecast(np.ones((1, 10)), 2).mean.shape == (1, 2)
        assert "toto-1.0" in repr(eng)
    assert eng.closed
    eng.close()  # again: nothing
    assert eng.info["family"] == "toto-1.0"  # still says what it was


def test_quantile_lookup(engine, totoc_module):
    f = engine.forecast(np.ones((1, 30)), 4, samples=16, quantiles=[0.1, 0.9])
    np.testing.assert_array_equal(f.quantile(0.9), f.quantiles[1])
    with pytest.raises(totoc_module.InvalidInput, match="quantile 0.5 was not asked for"):
        f.quantile(0.5)


def test_threads_of_a_later_engine_warn(totoc_module, engine_dir, engine):
    # the session's engine started the process's pool with one thread
    with pytest.warns(RuntimeWarning, match="threads=2 has no effect: .* started with 1 threads"):
        totoc_module.Engine(engine_dir, threads=2).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        totoc_module.Engine(engine_dir, threads=1).close()  # the same count: nothing to say


def test_the_fields_of_other_families_are_passed_through_and_refused_by_name(engine, totoc_module):
    # Toto 1.0 takes none of them: each is refused by name, as `totoc forecast` refuses it, before any work
    y = np.linspace(0, 1, 40, dtype=np.float32)[None]
    stamps = np.arange("2024-01-01T09:00", 40, dtype="datetime64[m]")
    for kwargs, field, why in [
        ({"samples": 4, "temperature": 0.5}, "temperature", "it draws its sample paths from the distribution"),
        ({"samples": 4, "top_k": 3}, "top_k", "it draws its sample paths"),
        ({"samples": 4, "top_p": 0.9}, "top_p", "it draws its sample paths"),
        ({"params": {"clip": 5}}, "params.clip", "it takes no parameters"),
        ({"columns": ["close"]}, "columns", "its variates are unnamed rows of `target`"),
        ({"timestamps": stamps}, "timestamps", "it forecasts from the values alone"),
        ({"future_timestamps": ["2024-01-02"] * 4}, "future_timestamps", "it does not read timestamps"),
    ]:
        with pytest.raises(totoc_module.InvalidInput, match=f"`{field}` is not a field Toto 1.0 takes: {why}"):
            engine.forecast(y, 4, **kwargs)
    # a series longer than the engine holds is refused the same way (its stamps are cut with it, not copied)
    long = np.linspace(0, 1, 400, dtype=np.float32)[None]
    with pytest.raises(totoc_module.InvalidInput, match="`timestamps` is not a field Toto 1.0 takes"):
        engine.forecast(long, 4, timestamps=np.arange("2024-01-01", 400, dtype="datetime64[D]"))
    # several series: one sequence of stamps each
    with pytest.raises(totoc_module.InvalidInput, match="`timestamps` has 1 sequences of stamps for 2 series"):
        engine.forecast([y, y], 4, timestamps=[stamps])
    with pytest.raises(totoc_module.InvalidInput, match="`columns` must be a sequence of column names"):
        engine.forecast(y, 4, columns="close")
    with pytest.raises(totoc_module.InvalidInput, match="`top_k` must be an integer"):
        engine.forecast(y, 4, samples=4, top_k=1.5)


def test_stamps_are_written_as_iso_text_with_their_wall_clock():
    import datetime

    from totoc import _engine

    # numpy datetime64 in any unit (hours gain minutes, months their day), the last `last` of a history
    assert _engine._stamps(np.arange("2024-01-01T09", 3, dtype="datetime64[h]"), "t", None, 2) == (
        3,
        ["2024-01-01T10:00", "2024-01-01T11:00"],
    )
    assert _engine._stamps(np.array(["2024-03"], dtype="datetime64[M]"), "t", None, 5) == (1, ["2024-03-01"])
    # the first `first` of future stamps; text as it is; datetimes by isoformat, a zone-aware one on its own clock
    zone = datetime.timezone(datetime.timedelta(hours=-5))
    given = ["2024-01-01T09:30:00", datetime.datetime(2024, 1, 2, 9, 30, tzinfo=zone), datetime.date(2024, 1, 3)]
    assert _engine._stamps(given, "t", 2, None) == (3, ["2024-01-01T09:30:00", "2024-01-02T09:30:00-05:00"])
    assert _engine._stamps(given, "t", None, None)[1][2] == "2024-01-03"
    with pytest.raises(Exception, match="`t` item 0 is a float; give stamps as ISO 8601 text"):
        _engine._stamps([1.5], "t", None, None)
    with pytest.raises(Exception, match="`t` must be a sequence of stamps"):
        _engine._stamps("2024-01-01", "t", None, None)
    pd = pytest.importorskip("pandas")
    idx = pd.date_range("2024-03-08 09:00", periods=2, freq="h", tz="America/New_York")
    assert _engine._stamps(idx, "t", None, 9) == (2, ["2024-03-08T09:00:00-05:00", "2024-03-08T10:00:00-05:00"])
    n, text = _engine._stamps(pd.Series(idx.tz_localize(None)), "t", None, 1)
    assert (n, len(text)) == (2, 1) and text[0].startswith("2024-03-08T10:00:00"), text
