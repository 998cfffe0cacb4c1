"""The metric oracle of backtest/tests/oracle.rs: scores the cases of a JSON file with fev's and utilsforecast's own
functions and writes every value as JSON records.

    python oracle.py CASES.json OUT.json

CASES.json: {"cases": [{"season": m, "quantile_levels": [...], "skill": bool, "models": {"model": SERIES, "seasonal_naive": SERIES}}]}
with SERIES = [{"unique_id": str, "windows": [{"cutoff": str, "history": [...], "actual": [...], "point": [...],
"quantiles": [[H values] per level]}]}], null = NaN (missing).

OUT.json: {"versions": {...}, "records": [{"case", "model", "scope", "unique_id", "cutoff", "metric", "value"}]},
value null when the package gives NaN/Inf (the Rust side must then leave the metric out).
* fev 0.10.0 (`fev.metrics.<METRIC>().compute`): mae, rmse, smape, mase, wql per window (one series, N = 1) and per
  cutoff (all series of the cutoff stacked into fev's [N, H, 1] arrays, histories concatenated with their lengths);
  overall = np.mean over the cutoffs (fev's `Task.evaluation_summary`: the mean over its evaluation windows).
* utilsforecast 0.2.17 (`utilsforecast.losses.scaled_crps` / `coverage` on a cross-validation table with `cutoff`
  and `{model}-lo-{L}` / `{model}-hi-{L}` columns, missing-`y` rows dropped): per (cutoff, unique_id); per cutoff
  the mean over series (`evaluate(..., agg_fn="mean")`'s aggregation); overall the mean over cutoffs.
* series scope: the mean of the per-window package values of the series (NaN windows left out).
* fev.leaderboard(summaries, baseline_model="seasonal_naive"): the skill score with the whole backtest as one task
  (scope "skill") and with each cutoff as one task (scope "skill_by_cutoff"), on the cases marked "skill" (each
  leaderboard call costs ~0.2 s).
"""

import json
import sys
import warnings
from importlib.metadata import version

import numpy as np
import pandas as pd

import fev
import fev.metrics
import utilsforecast.losses as ufl

FEV_METRICS = {"mae": fev.metrics.MAE, "rmse": fev.metrics.RMSE, "smape": fev.metrics.SMAPE,
               "mase": fev.metrics.MASE, "wql": fev.metrics.WQL}


def arr(values):
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def clean(value):
    value = float(value)
    return value if np.isfinite(value) else None


def fev_scores(windows, season, levels):
    """fev's metrics over the given windows stacked as N series (one cutoff)."""
    y_true = np.stack([arr(w["actual"]) for w in windows])[:, :, None]
    y_pred = np.stack([arr(w["point"]) for w in windows])[:, :, None]
    q_pred = np.stack([np.array(w["quantiles"], dtype=np.float64).T for w in windows])[:, :, None, :]  # [N, H, 1, Q]
    past = [arr(w["history"]) for w in windows]
    y_past = np.concatenate(past)[:, None]
    lengths = np.array([len(p) for p in past], dtype=np.int64)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fev silences these too (EvaluationWindow.compute_metrics)
        for name, metric in FEV_METRICS.items():
            out[name] = metric().compute(y_true=y_true, y_pred=y_pred, y_past=y_past, y_past_lengths=lengths,
                                         q_pred=q_pred, seasonality=season, quantile_levels=levels)
    return out


def column(q):
    """utilsforecast's quantile column names (the median has no lo/hi column; any name works for scaled_crps)."""
    if q < 0.5:
        return f"model-lo-{round(100 - 200 * q)}"
    if q > 0.5:
        return f"model-hi-{round(200 * q - 100)}"
    return "model-median"


def interval_levels(levels):
    return sorted({round(100 - 200 * q) for q in levels if q < 0.5 and any(abs(o - (1 - q)) < 1e-12 for o in levels)})


def cv_table(series, levels):
    rows = []
    for s in series:
        for w in s["windows"]:
            for t, y in enumerate(w["actual"]):
                row = {"unique_id": s["unique_id"], "cutoff": w["cutoff"], "ds": t, "y": y, "model": w["point"][t]}
                row.update({column(q): w["quantiles"][i][t] for i, q in enumerate(levels)})
                rows.append(row)
    df = pd.DataFrame(rows)
    df["y"] = df["y"].astype("float64")
    return df[df["y"].notna()].reset_index(drop=True)


def score_model(case_index, model, series, season, levels, records):
    def put(scope, uid, cutoff, metric, value):
        records.append({"case": case_index, "model": model, "scope": scope, "unique_id": uid, "cutoff": cutoff,
                        "metric": metric, "value": clean(value)})

    cutoffs = []
    by_cutoff = {}
    for s in series:
        per_series = {}
        for w in s["windows"]:
            if w["cutoff"] not in by_cutoff:
                cutoffs.append(w["cutoff"])
                by_cutoff[w["cutoff"]] = []
            by_cutoff[w["cutoff"]].append(w)
            for name, value in fev_scores([w], season, levels).items():
                put("window", s["unique_id"], w["cutoff"], name, value)
                per_series.setdefault(name, []).append(value)
        for name, values in per_series.items():
            finite = [v for v in values if np.isfinite(v)]
            put("series", s["unique_id"], None, name, np.mean(finite) if finite else np.nan)
    per_cutoff = {}
    for c in cutoffs:
        for name, value in fev_scores(by_cutoff[c], season, levels).items():
            put("cutoff", None, c, name, value)
            per_cutoff.setdefault(name, []).append(value)
    for name, values in per_cutoff.items():
        put("overall", None, None, name, np.mean(values))

    df = cv_table(series, levels)
    uf = {"scaled_crps": ufl.scaled_crps(df, models={"model": [column(q) for q in levels]}, quantiles=np.array(levels))}
    for level in interval_levels(levels):
        uf[f"coverage_{level}"] = ufl.coverage(df, models=["model"], level=level)
    for name, table in uf.items():
        for row in table.itertuples(index=False):
            put("window", row.unique_id, row.cutoff, name, row.model)
        # utilsforecast.evaluate(agg_fn="mean") averages the per-series values of each cutoff.
        per_cut = table.groupby("cutoff")["model"].mean()
        for c, value in per_cut.items():
            put("cutoff", None, c, name, value)
        put("overall", None, None, name, per_cut.mean())
        per_series = table.groupby("unique_id")["model"].mean()
        for uid, value in per_series.items():
            put("series", uid, None, name, value)
    return per_cutoff


def skill(case_index, results, cutoffs, levels, records):
    """fev.leaderboard's skill score of "model" against "seasonal_naive"."""
    for metric in FEV_METRICS:
        for scope, tasks in (("skill", {"backtest": lambda m: np.mean(results[m][metric])}),
                             ("skill_by_cutoff", {c: (lambda m, i=i: results[m][metric][i])
                                                  for i, c in enumerate(cutoffs)})):
            summaries = [{"model_name": m, "dataset_path": task, "test_error": error(m), "fev_version": fev.__version__,
                          "quantile_levels": levels, "seasonality": 1, "horizon": 1}
                         for task, error in tasks.items() for m in ("model", "seasonal_naive")]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                board = fev.leaderboard(summaries, baseline_model="seasonal_naive")
            records.append({"case": case_index, "model": "model", "scope": scope, "unique_id": None, "cutoff": None,
                            "metric": metric, "value": clean(board.loc["model", "skill_score"])})


def main():
    cases = json.load(open(sys.argv[1]))["cases"]
    records = []
    for i, case in enumerate(cases):
        levels = case["quantile_levels"]
        results = {}
        for model, series in case["models"].items():
            results[model] = score_model(i, model, series, case["season"], levels, records)
        cutoffs = list(dict.fromkeys(w["cutoff"] for s in case["models"]["model"] for w in s["windows"]))
        if case["skill"]:
            skill(i, results, cutoffs, levels, records)
    versions = {p: version(p) for p in ("fev", "utilsforecast", "numpy", "pandas", "scipy")}
    json.dump({"versions": versions, "records": records}, open(sys.argv[2], "w"), allow_nan=False)


if __name__ == "__main__":
    main()
