"""Converts public statsmodels datasets into the data-format fixtures of `totoc forecast` (tests/fixtures/data/).

The same series are written as long CSV, long Parquet, wide CSV with a timestamp column and JSON Lines, so the
integration tests (tests/integration/data.rs) can check that every format gives the same forecasts:

* co2 (weekly, Saturdays; Mauna Loa CO2, statsmodels.datasets.co2): weeks 220-459 of the series. The weeks whose
  value is missing in the dataset are left out of the tables (gaps the reader must turn back into missing points)
  and are `null` in the JSON.
* elnino (monthly, statsmodels.datasets.elnino): the 1950-2010 table of monthly sea surface temperatures, one
  row per year, melted to one row per month (first of the month).
* sunspots (yearly, statsmodels.datasets.sunspots): yearly sunspot activity 1700-2008 (1 January).
* macro (quarterly, statsmodels.datasets.macrodata): realgdp, realcons, realinv 1959Q1-2009Q3 as three target
  columns of one multivariate series (first day of each quarter).
* stocks (daily closes on trading days only, bokeh_sampledata.stocks, public domain Quandl WIKI prices): the last
  300 closes of AAPL as a wide `date,close` table ending Friday 1 March 2013 (session calendars: weekends are not
  missing points, market holidays are), and the last 1,200 closes of AAPL and MSFT as one long table.

Usage: python convert.py OUT_DIR        (writes the files)
       python convert.py --check DIR    (regenerates into a temporary directory and compares with DIR)
"""

import filecmp
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import statsmodels
import statsmodels.datasets as sm_data
import bokeh_sampledata.stocks as bokeh_stocks
from importlib.metadata import version


def univariate_series():
    """(id, DataFrame[ds, y]) of the univariate series, on their full regular grids (NaN = missing)."""
    co2 = sm_data.co2.load_pandas().data.iloc[220:460]
    co2 = pd.DataFrame({"ds": co2.index, "y": co2["co2"].to_numpy()})

    elnino = sm_data.elnino.load_pandas().data
    months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    rows = [
        (pd.Timestamp(year=int(r.YEAR), month=m + 1, day=1), float(getattr(r, name)))
        for r in elnino.itertuples()
        for m, name in enumerate(months)
    ]
    elnino = pd.DataFrame(rows, columns=["ds", "y"])

    sun = sm_data.sunspots.load_pandas().data
    sun = pd.DataFrame({"ds": [pd.Timestamp(year=int(y), month=1, day=1) for y in sun.YEAR], "y": sun.SUNACTIVITY})
    return [("co2", co2), ("elnino", elnino), ("sunspots", sun)]


def macro_series():
    """DataFrame[ds, realgdp, realcons, realinv], quarterly."""
    m = sm_data.macrodata.load_pandas().data
    ds = [pd.Timestamp(year=int(y), month=3 * (int(q) - 1) + 1, day=1) for y, q in zip(m.year, m.quarter)]
    return pd.DataFrame({"ds": ds, "realgdp": m.realgdp, "realcons": m.realcons, "realinv": m.realinv})


def stock_closes(ticker, rows):
    """DataFrame[ds, y] of a stock's last `rows` daily closes (trading days only, as shipped)."""
    d = getattr(bokeh_stocks, ticker)
    df = pd.DataFrame({"ds": pd.to_datetime(d["date"]), "y": d["close"]})
    return df.iloc[-rows:].reset_index(drop=True)


def dates(col):
    return [t.strftime("%Y-%m-%d") for t in col]


def f32_text(x):
    """The shortest text that reads back as the same f32 (what the reader stores)."""
    return repr(float(np.float32(x)))


def write_csv(df, path):
    out = df.copy()
    out["ds"] = dates(out["ds"])
    out.to_csv(path, index=False, lineterminator="\n", float_format=None)


def write_parquet(df, path, date32=True):
    out = df.copy()
    if date32:
        out["ds"] = [t.date() for t in out["ds"]]
    table = pa.Table.from_pandas(out, preserve_index=False)
    pq.write_table(table, path, compression="snappy")


def write_all(out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    series = univariate_series()

    # Long tables: observed rows only (missing weeks of co2 are gaps), in time order across series (so the rows
    # of one series are interleaved with the others), as a database export would give them.
    long = pd.concat(
        [df.dropna().assign(unique_id=sid) for sid, df in series], ignore_index=True
    )[["unique_id", "ds", "y"]]
    long = long.sort_values(["ds", "unique_id"], kind="stable").reset_index(drop=True)
    write_csv(long, out_dir / "long.csv")
    write_parquet(long, out_dir / "long.parquet")
    # The same table with pandas' own datetime64 column (an Arrow timestamp, not a date).
    write_parquet(long, out_dir / "long_timestamp.parquet", date32=False)

    # One series per wide CSV: a timestamp column and the value; co2 keeps its gaps as left-out rows.
    for sid, df in series:
        write_csv(df.dropna().rename(columns={"y": sid}), out_dir / f"{sid}_wide.csv")

    # JSON Lines: one request per series on its full grid, missing points as null.
    with open(out_dir / "long.jsonl", "w") as f:
        for sid, df in series:
            req = {
                "id": sid,
                "timestamps": dates(df["ds"]),
                "target": [[None if np.isnan(x) else float(np.float32(x)) for x in df["y"]]],
            }
            f.write(json.dumps(req) + "\n")

    macro = macro_series()
    write_csv(macro.assign(unique_id="us")[["unique_id", "ds", "realgdp", "realcons", "realinv"]],
              out_dir / "macro_long.csv")
    write_parquet(macro.assign(unique_id="us")[["unique_id", "ds", "realgdp", "realcons", "realinv"]],
                  out_dir / "macro_long.parquet")
    write_csv(macro, out_dir / "macro_wide.csv")

    # Daily stock closes: trading days only, so the reader must infer a weekday calendar.
    aapl = stock_closes("AAPL", 300)
    aapl = pd.DataFrame({"date": dates(aapl["ds"]), "close": aapl["y"]})
    aapl.to_csv(out_dir / "aapl_wide.csv", index=False, lineterminator="\n")
    stocks = pd.concat(
        [stock_closes(t, 1200).assign(unique_id=t) for t in ("AAPL", "MSFT")], ignore_index=True
    )[["unique_id", "ds", "y"]]
    write_csv(stocks, out_dir / "stocks_long.csv")

    provenance = {
        "generator": "tests/data/convert.py",
        "note": "Synthetic daily, hourly, month-end and epoch series are made by tests/integration/data.rs, the "
        "hourly FX-session series by tests/integration/calendar.rs; the benchmark table is synthetic too "
        "(tests/data/make_bench_table.py).",
        "packages": {"statsmodels": statsmodels.__version__, "pandas": pd.__version__, "pyarrow": pa.__version__,
                     "bokeh-sampledata": version("bokeh-sampledata")},
        "datasets": {
            "co2": {"module": "statsmodels.datasets.co2", "license": sm_data.co2.COPYRIGHT.strip(),
                    "rows": "220-459 (weekly)"},
            "elnino": {"module": "statsmodels.datasets.elnino", "license": sm_data.elnino.COPYRIGHT.strip(),
                       "rows": "all (monthly)"},
            "sunspots": {"module": "statsmodels.datasets.sunspots", "license": sm_data.sunspots.COPYRIGHT.strip(),
                         "rows": "all (yearly)"},
            "macro": {"module": "statsmodels.datasets.macrodata", "license": sm_data.macrodata.COPYRIGHT.strip(),
                      "rows": "all (quarterly), columns realgdp, realcons, realinv"},
            "stocks": {"module": "bokeh_sampledata.stocks",
                       "license": "Public Domain (Quandl WIKI Prices, declared public domain by Quandl; the package "
                       "is BSD-3-Clause, Copyright (c) Bokeh Contributors)",
                       "rows": "aapl_wide.csv: the last 300 AAPL closes (2011-12-19 to 2013-03-01, trading days); "
                       "stocks_long.csv: the last 1200 closes of AAPL and MSFT (daily, trading days)"},
        },
    }
    (out_dir / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")


def tables_equal(a, b):
    if a.suffix == ".parquet":
        return pq.read_table(a).equals(pq.read_table(b))
    return filecmp.cmp(a, b, shallow=False)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        want = Path(sys.argv[2])
        with tempfile.TemporaryDirectory() as tmp:
            write_all(Path(tmp))
            names = sorted(p.name for p in Path(tmp).iterdir())
            bad = [n for n in names if not (want / n).exists() or not tables_equal(Path(tmp) / n, want / n)]
        if bad:
            sys.exit(f"data fixtures differ from a fresh conversion: {bad}; rerun tests/data/convert.py {want}")
        print(f"data fixtures match a fresh conversion ({len(names)} files)")
    elif len(sys.argv) == 2:
        write_all(Path(sys.argv[1]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
