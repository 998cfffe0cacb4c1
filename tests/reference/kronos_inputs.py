#!/usr/bin/env python3
"""Extracts the real OHLCV rows the Kronos fixtures are cut from: tests/fixtures/kronos/inputs/.

    kronos_inputs.py [--out DIR]       # (re)write stocks_ohlcv.csv and provenance.json
    kronos_inputs.py --check [DIR]     # extract again and compare bytes (scripts/test.sh, with the data venv)

Source: `bokeh_sampledata.stocks` (bokeh-sampledata 2026.1, tests/data/requirements.txt): Quandl WIKI daily prices,
public domain, unadjusted open/high/low/close/volume on trading days only, ending 2013-03-01. The last ROWS rows of
each of TICKERS are written as `ticker,date,open,high,low,close,volume`, every value as the package parses it
(float / int, Python's repr), in ticker then date order. Only the standard library and bokeh_sampledata are imported
(its dicts, not its pandas frame), so the data venv or any venv with the wheel on its path can run it.

The Kronos fixture generator (regen_kronos_fixtures.py) reads this file, not the package, so the reference venv
needs no copy of the data set. `bars` makes the other input, seeded synthetic 15-minute bars (minute and hour vary),
for the fixtures and the benchmark (bench_kronos_reference.py).
"""

import argparse
import datetime
import filecmp
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "fixtures", "kronos", "inputs")
TICKERS = ("GOOG", "AAPL", "IBM", "MSFT")
ROWS = 300
FIELDS = ("open", "high", "low", "close", "volume")


def bars(seed, count):
    """`count` 15-minute bars from 2024-03-04 09:30 (Mon) on weekdays: (stamps, {column: values}). Prices move by
    a random walk (0.3% per bar, 1% overnight), to the cent; volume has the intraday U shape, in lots of 100;
    amount is volume x the typical price (h + l + c)/3, to the cent."""
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(seed))
    stamps, t = [], datetime.datetime(2024, 3, 4, 9, 30)
    while len(stamps) < count:
        if t.weekday() < 5:
            stamps += [t + datetime.timedelta(minutes=15 * k) for k in range(26)]
        t += datetime.timedelta(days=1)
    stamps = stamps[:count]
    cols = {k: [] for k in ("open", "high", "low", "close", "volume", "amount")}
    close = round(100.0 * math.exp(0.3 * rng.standard_normal()), 2)
    for i, s in enumerate(stamps):
        first = i > 0 and s.date() != stamps[i - 1].date()
        o = round(close * math.exp((0.01 if first else 0.0005) * rng.standard_normal()), 2)
        c = round(o * math.exp(0.003 * rng.standard_normal()), 2)
        hi = max(round(max(o, c) * (1 + 0.002 * abs(rng.standard_normal())), 2), o, c)
        lo = min(round(min(o, c) * (1 - 0.002 * abs(rng.standard_normal())), 2), o, c)
        k = (s.hour * 60 + s.minute - 570) // 15  # bar of the session, 0..25
        vol = 100.0 * round(200 * (1 + 1.5 * ((k - 12.5) / 12.5) ** 2) * math.exp(0.4 * rng.standard_normal()))
        amt = round(vol * (hi + lo + c) / 3 * (1 + 0.001 * rng.standard_normal()), 2)
        for key, v in zip(cols, (o, hi, lo, c, vol, amt)):
            cols[key].append(float(v))
        close = c
    return stamps, cols


def stamp_text(dt, zulu=False):
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if zulu else "")


def write(out_dir):
    from importlib.metadata import version

    import bokeh_sampledata.stocks as stocks

    os.makedirs(out_dir, exist_ok=True)
    lines = ["ticker,date," + ",".join(FIELDS)]
    spans = {}
    for t in TICKERS:
        d = getattr(stocks, t)
        n = len(d["date"])
        for i in range(n - ROWS, n):
            lines.append(",".join([t, d["date"][i]] + [repr(d[f][i]) for f in FIELDS]))
        spans[t] = f"{d['date'][n - ROWS]} to {d['date'][n - 1]}"
    with open(os.path.join(out_dir, "stocks_ohlcv.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    prov = {
        "generator": "tests/reference/kronos_inputs.py",
        "package": {"bokeh-sampledata": version("bokeh-sampledata")},
        "module": "bokeh_sampledata.stocks",
        "license": "Public Domain (Quandl WIKI Prices, declared public domain by Quandl; the package is "
        "BSD-3-Clause, Copyright (c) Bokeh Contributors)",
        "rows": f"the last {ROWS} trading days of each ticker, unadjusted OHLCV",
        "spans": spans,
    }
    with open(os.path.join(out_dir, "provenance.json"), "w") as f:
        f.write(json.dumps(prov, indent=1, sort_keys=True) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="extract again and compare with the committed files")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args(argv)
    if not a.check:
        write(a.out)
        print(f"wrote {a.out}")
        return 0
    with tempfile.TemporaryDirectory(prefix="totoc-kronos-inputs-") as tmp:
        write(tmp)
        bad = [f for f in sorted(os.listdir(tmp)) if not filecmp.cmp(os.path.join(tmp, f), os.path.join(a.out, f), False)]
    if bad:
        print(f"kronos inputs differ from a fresh extraction: {', '.join(bad)} (rewrite with {__file__})", file=sys.stderr)
        return 1
    print("kronos inputs: identical to a fresh extraction from bokeh-sampledata")
    return 0


if __name__ == "__main__":
    sys.exit(main())
