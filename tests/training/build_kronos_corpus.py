#!/usr/bin/env python3
"""Builds the training corpus of the small Kronos trained here (issue 35) from data that PyPI packages ship.

Nothing is downloaded at run time. Two sources:

* **bokeh-sampledata 2026.1** `bokeh_sampledata.stocks`: daily AAPL, FB, GOOG, IBM, MSFT (Quandl WIKI prices, public
  domain; the package is BSD-3-Clause). Each row has open, high, low, close, volume and adj_close; the prices are
  split-adjusted with the package's own adjustment factor f = adj_close / close: open, high, low, close × f and
  volume ÷ f (so a split does not read as a 50% crash). amount is absent, as in the sampledata; it is derived as
  upstream's predictor derives a missing amount, volume × mean(open, high, low, close).
* **Synthetic FX-like hourly candles** (numpy PCG64, seed SYNTH_SEED): 8 series on a weekly session from Sunday
  17:00 to Friday 17:00 America/New_York (120 hourly candles a week), 44 weeks from 2024-01-07, so the run crosses
  both 2024 DST changes (March 10, November 3). Half the series are stamped in New York wall-clock time, half in UTC
  (where the session opens at 22:00 in winter and 21:00 in summer): the hour and weekday features see the shift.
  Prices follow a random walk whose volatility follows the session hour (Asia quiet, London / New York busy); volume
  has the same intraday shape; amount = volume × the typical price (h + l + c)/3.

**Held out** by time (the last 20% of the rows of every stock and every synthetic series) and by series (IBM
whole: none of its rows is training data). Training windows come from the first 80% of AAPL, FB, GOOG, MSFT and of
the synthetic series; evaluation windows lie inside the held-out rows (their lookback too).

Outputs in OUT_DIR:
* `kronos_corpus.npz`: `values` float64 [rows, 6] (open, high, low, close, volume, amount, every series
  concatenated), `stamps` int32 [rows, 5] (minute, hour, weekday Mon=0, day, month: Kronos's time features, of the
  wall clock as stamped), `stamp_text` str [rows] (that wall clock, YYYY-MM-DDTHH:MM:SS), `offsets` int64 [n+1],
  `cuts` int64 [n] (a series' training rows are [0, cut), its
  held-out rows [cut, len)), `ids` str [n], `synthetic` bool [n];
* `kronos-corpus.json`: per series its source, package version, licence, frequency, time zone of the stamps, first
  and last stamp, rows, training and held-out rows; the package versions, the split rule and the sha256 of the npz
  and of the package's stock data file.

Usage: build_kronos_corpus.py OUT_DIR          (data venv python: tests/training/setup_data_venv.sh prints it)
       build_kronos_corpus.py --check DIR      (rebuilds into a temporary directory; DIR/kronos-corpus.json, e.g.
                                                tests/fixtures/trained, must be byte-identical to the rebuild)
"""

import datetime
import hashlib
import json
import os
import sys
import tempfile
from importlib.metadata import version
from zoneinfo import ZoneInfo

import numpy as np

TICKERS = ("AAPL", "FB", "GOOG", "IBM", "MSFT")
HELDOUT_SERIES = ("IBM",)
HELDOUT_FRACTION = 0.2
SYNTH_SEED = 35
SYNTH_SERIES = 8
SYNTH_WEEKS = 44
SESSION_START = datetime.datetime(2024, 1, 7, 17, 0, tzinfo=ZoneInfo("America/New_York"))  # a Sunday
COLUMNS = ("open", "high", "low", "close", "volume", "amount")
LICENCE_STOCKS = ("Quandl WIKI prices, declared public domain by Quandl; bokeh-sampledata is BSD-3-Clause, "
                  "Copyright (c) Bokeh Contributors")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def features(dt):
    """Kronos's time features of a wall-clock datetime: minute, hour, weekday (Mon = 0), day, month."""
    return (dt.minute, dt.hour, dt.weekday(), dt.day, dt.month)


def stock_series():
    """[(id, values [n, 6], stamps [n, 5], meta)] of the five tickers, split-adjusted."""
    import bokeh_sampledata.stocks as stocks

    out = []
    for t in TICKERS:
        d = getattr(stocks, t)
        close = np.asarray(d["close"], np.float64)
        f = np.asarray(d["adj_close"], np.float64) / close
        o, h, lo, c = (np.asarray(d[k], np.float64) * f for k in ("open", "high", "low", "close"))
        vol = np.asarray(d["volume"], np.float64) / f
        amount = vol * (o + h + lo + c) / 4.0  # upstream's rule for a missing amount
        values = np.stack([o, h, lo, c, vol, amount], axis=1)
        dates = [datetime.datetime.strptime(s, "%Y-%m-%d") for s in d["date"]]
        stamps = np.array([features(x) for x in dates], np.int32)
        texts = [x.strftime("%Y-%m-%dT%H:%M:%S") for x in dates]
        meta = {"source": "bokeh_sampledata.stocks", "package": "bokeh-sampledata", "licence": LICENCE_STOCKS,
                "frequency": "trading days", "stamps": "the trading date at 00:00 (no time zone)",
                "first": d["date"][0], "last": d["date"][-1],
                "adjustment": "open, high, low, close x adj_close/close; volume x close/adj_close; amount = volume x "
                "mean(open, high, low, close)"}
        out.append((t, values, stamps, texts, meta))
    return out


# Hourly volatility (relative) by New York hour of the candle's open: Asia quiet, London from 03:00, New York
# 08:00-12:00 busiest, the late afternoon quiet.
def hour_activity(ny_hour):
    if 3 <= ny_hour < 8:
        return 1.3
    if 8 <= ny_hour < 12:
        return 1.8
    if 12 <= ny_hour < 17:
        return 1.0
    return 0.6


def synthetic_series():
    """[(id, values, stamps, meta)]: FX-like hourly candles, half stamped in New York time, half in UTC."""
    utc = ZoneInfo("UTC")
    ny = ZoneInfo("America/New_York")
    opens = []
    for w in range(SYNTH_WEEKS):
        start = (SESSION_START.replace(tzinfo=None) + datetime.timedelta(days=7 * w)).replace(tzinfo=ny)
        for k in range(120):  # Sun 17:00 .. Fri 16:00 opens, New York wall clock (no DST hour in the session)
            local = start.replace(tzinfo=None) + datetime.timedelta(hours=k)
            opens.append(local.replace(tzinfo=ny))
    rng = np.random.Generator(np.random.PCG64(SYNTH_SEED))
    out = []
    for s in range(SYNTH_SERIES):
        zone = "America/New_York" if s % 2 == 0 else "UTC"
        level = float(np.exp(rng.uniform(-0.5, 1.5)))  # 0.6 .. 4.5, like FX rates
        vol_h = float(rng.uniform(0.0008, 0.002))  # hourly volatility
        base_volume = float(rng.uniform(500, 5000))
        rows, stamps, texts = [], [], []
        close = level
        for t in opens:
            a = hour_activity(t.hour)
            gap = t.weekday() == 6 and t.hour == 17  # the Sunday open gaps from Friday's close
            o = close * float(np.exp((3.0 if gap else 0.1) * vol_h * rng.standard_normal()))
            c = o * float(np.exp(a * vol_h * rng.standard_normal()))
            h = max(o, c) * (1 + a * vol_h * abs(float(rng.standard_normal())) * 0.7)
            lo = min(o, c) * (1 - a * vol_h * abs(float(rng.standard_normal())) * 0.7)
            v = round(base_volume * a * float(np.exp(0.35 * rng.standard_normal())))
            rows.append((o, h, lo, c, float(v), v * (h + lo + c) / 3.0))
            wall = t if zone != "UTC" else t.astimezone(utc)
            stamps.append(features(wall.replace(tzinfo=None)))
            texts.append(wall.strftime("%Y-%m-%dT%H:%M:%S"))
            close = c
        first = opens[0] if zone != "UTC" else opens[0].astimezone(utc)
        last = opens[-1] if zone != "UTC" else opens[-1].astimezone(utc)
        meta = {"source": "synthetic (numpy PCG64)", "seed": SYNTH_SEED, "licence": "-",
                "frequency": "hourly, Sun 17:00 - Fri 17:00 America/New_York", "stamps": f"{zone} wall clock",
                "first": first.strftime("%Y-%m-%dT%H:%M"), "last": last.strftime("%Y-%m-%dT%H:%M")}
        out.append((f"fx{s}", np.array(rows, np.float64), np.array(stamps, np.int32), texts, meta))
    return out


def build(out_dir):
    import bokeh_sampledata

    os.makedirs(out_dir, exist_ok=True)
    series = [(x, False) for x in stock_series()] + [(x, True) for x in synthetic_series()]
    values, stamps, texts, offsets, cuts, ids, synth, listing = [], [], [], [0], [], [], [], []
    for (sid, v, st, tx, meta), is_synth in series:
        n = len(v)
        cut = 0 if sid in HELDOUT_SERIES else n - int(round(HELDOUT_FRACTION * n))
        assert np.isfinite(v).all() and (v[:, :4] > 0).all(), f"{sid}: non-finite or non-positive prices"
        values.append(v)
        stamps.append(st)
        texts += tx
        offsets.append(offsets[-1] + n)
        cuts.append(cut)
        ids.append(sid)
        synth.append(is_synth)
        listing.append(dict(meta, id=sid, rows=n, training_rows=cut, heldout_rows=n - cut,
                            split="held out whole" if cut == 0 else f"rows [0, {cut}) train, [{cut}, {n}) held out"))
    npz = os.path.join(out_dir, "kronos_corpus.npz")
    np.savez(npz, values=np.concatenate(values), stamps=np.concatenate(stamps),
             stamp_text=np.array(texts), offsets=np.array(offsets, np.int64),
             cuts=np.array(cuts, np.int64), ids=np.array(ids), synthetic=np.array(synth))
    stocks_csv = os.path.join(os.path.dirname(bokeh_sampledata.__file__), "_data", "stocks.csv.gz")
    n_train = int(sum(cuts))
    n_rows = int(offsets[-1])
    prov = {
        "generator": "tests/training/build_kronos_corpus.py",
        "packages": {"bokeh-sampledata": version("bokeh-sampledata"), "numpy": np.__version__},
        "columns": list(COLUMNS),
        "time_features": ["minute", "hour", "weekday (Mon=0)", "day", "month"],
        "split": f"by time: the last {HELDOUT_FRACTION:.0%} of every series' rows are held out; by series: "
        f"{', '.join(HELDOUT_SERIES)} held out whole",
        "synthetic": {"seed": SYNTH_SEED, "series": SYNTH_SERIES, "weeks": SYNTH_WEEKS,
                      "session": "Sun 17:00 - Fri 17:00 America/New_York, hourly; DST changes 2024-03-10 and "
                      "2024-11-03 inside the run"},
        "counts": {"series": len(ids), "rows": n_rows, "training_rows": n_train, "heldout_rows": n_rows - n_train,
                   "training_rows_real": int(sum(c for c, s in zip(cuts, synth) if not s)),
                   "training_rows_synthetic": int(sum(c for c, s in zip(cuts, synth) if s))},
        "series": listing,
        "files": {"kronos_corpus.npz": sha256_file(npz)},
        "package_files_sha256": {"bokeh_sampledata/_data/stocks.csv.gz": sha256_file(stocks_csv)},
    }
    with open(os.path.join(out_dir, "kronos-corpus.json"), "w") as f:
        json.dump(prov, f, indent=1, sort_keys=True)
        f.write("\n")
    return prov


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        with tempfile.TemporaryDirectory(prefix="totoc-kronos-corpus-") as tmp:
            build(tmp)
            with open(os.path.join(tmp, "kronos-corpus.json"), "rb") as f:
                fresh = f.read()
        with open(os.path.join(argv[2], "kronos-corpus.json"), "rb") as f:
            committed = f.read()
        if fresh != committed:
            print(f"{argv[2]}/kronos-corpus.json differs from a fresh build (rebuild with {argv[0]} OUT and copy "
                  "kronos-corpus.json)", file=sys.stderr)
            return 1
        print("kronos corpus: identical to a fresh build from the pinned packages")
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    prov = build(argv[1])
    print(json.dumps(prov["counts"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
