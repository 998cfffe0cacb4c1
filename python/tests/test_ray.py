"""totoc.ray on a local Ray cluster started here (4 logical CPUs on this machine's 2 cores): 2,000 series through
`map_batches` equal one `predict_df`; each actor process loads the engine once; an actor that dies on a marked
batch is restarted by Ray and every series comes out exactly once."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import ray

import totoc.ray

from conftest import THREADS

SERIES = 2000
HORIZON = 8
GROUP = 256  # engines::engine::FORECAST_GROUP
MARKED = "s1234"


class CountingForecaster(totoc.ray.Forecaster):
    """Logs each construction with its process and that process's engine loads; dies (``os._exit``) the first
    time it is given the marked series."""

    def __init__(self, *args, log: str, marker: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.marker = Path(marker)
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {totoc.ray.engine_loads()}\n")

    def __call__(self, batch):
        if MARKED in set(batch["unique_id"]) and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os._exit(1)
        return super().__call__(batch)


def history() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    frames = []
    for i in range(SERIES):
        n = int(rng.integers(24, 96))
        start = pd.Timestamp("2024-01-01") + pd.Timedelta(hours=int(rng.integers(0, 500)))
        y = 50 + np.cumsum(rng.normal(size=n))
        frames.append(pd.DataFrame({"unique_id": f"s{i:04d}", "ds": pd.date_range(start, periods=n, freq="h"), "y": y}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def cluster():
    # The session's logs and sockets in a folder of its own, removed after: by default each run adds a session to
    # /tmp/ray and nothing removes it. A short path: the sockets inside must stay under the 107-byte limit.
    temp_dir = tempfile.mkdtemp(prefix="totoc-ray-")
    ray.init(num_cpus=4, include_dashboard=False, object_store_memory=256 << 20, log_to_driver=False,
             configure_logging=False, _temp_dir=temp_dir)
    # the test's Forecaster subclass travels to the actors by value (they cannot import this test module)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def test_map_batches_equals_one_predict_df_with_a_restarted_actor(cluster, engine, engine_dir, tmp_path):
    long = history()
    want = engine.predict_df(long, HORIZON)
    log, marker = tmp_path / "loads.log", tmp_path / "crashed"
    rows = totoc.ray.pack(long)
    # Eight blocks, cut here (from_pandas's own override_num_blocks splits with numpy, which pandas 3 breaks), of
    # GROUP series: predict_df forecasts a table in groups of GROUP series (the CLI's), so with batches of GROUP
    # each batch is the same engine call as one of predict_df's groups and the numbers must be equal, bit for bit.
    ds = ray.data.from_pandas([rows.iloc[i : i + GROUP] for i in range(0, len(rows), GROUP)])
    got = ds.map_batches(
        CountingForecaster,
        fn_constructor_args=(str(engine_dir), HORIZON),
        fn_constructor_kwargs={"threads": THREADS, "log": str(log), "marker": str(marker)},
        batch_size=GROUP,
        batch_format="pandas",
        compute=ray.data.ActorPoolStrategy(size=2),
        num_cpus=1,
        max_restarts=-1,
        max_task_retries=-1,
    ).to_pandas()

    assert marker.exists(), "the marked batch killed its actor"
    # every series exactly once: each id has its HORIZON rows, no more
    counts = got["unique_id"].value_counts()
    assert set(counts.index) == set(want["unique_id"]) and len(counts) == SERIES
    assert (counts == HORIZON).all(), counts[counts != HORIZON]
    got = got.sort_values(["unique_id", "ds"], ignore_index=True)
    want = want.sort_values(["unique_id", "ds"], ignore_index=True)
    assert list(got.columns) == list(want.columns)
    # Ray's to_pandas gives Arrow-backed columns: the same instants
    pd.testing.assert_series_equal(got["ds"].astype(want["ds"].dtype), want["ds"])
    np.testing.assert_array_equal(got["mean"].to_numpy(np.float32), want["mean"].to_numpy(np.float32))
    assert (got["context_truncated"] == want["context_truncated"]).all()

    # one engine load per actor process: the first two actors and the one that replaced the dead actor
    lines = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    pids = [pid for pid, _ in lines]
    assert all(loads == 1 for _, loads in lines), lines
    assert len(set(pids)) == len(pids) >= 3, lines
    assert int(marker.read_text()) in pids


def test_pack_and_unpack_round_trip(engine_dir):
    long = history().head(500)
    rows = totoc.ray.pack(long)
    assert len(rows) == long["unique_id"].nunique()
    f = totoc.ray.Forecaster(engine_dir, HORIZON, threads=THREADS)
    back = f.unpack(rows)
    pd.testing.assert_frame_equal(back, long[["unique_id", "ds", "y"]].reset_index(drop=True))


def test_a_long_batch_is_refused(engine_dir, totoc_module):
    f = totoc.ray.Forecaster(engine_dir, HORIZON, threads=THREADS)
    with pytest.raises(totoc_module.InvalidInput, match="holds a scalar.*one row per series"):
        f(history().head(50))
    with pytest.raises(totoc_module.InvalidInput, match="no column 'y'"):
        f(pd.DataFrame({"unique_id": ["a"], "ds": [[1]]}))
    with pytest.raises(totoc_module.InvalidInput, match="column 'y' has 1 values"):
        f(pd.DataFrame({"unique_id": ["a"], "ds": [[1, 2]], "y": [[1.0]]}))
