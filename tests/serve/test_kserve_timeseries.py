"""`POST /v1/timeseries/forecast` checked against KServe's own pydantic types (kserve 0.21).

Loads `kserve/protocol/rest/timeseries/types.py` of the installed kserve package by file path (importing `kserve`
itself would start its server stack), then for each case of `cases.json`:

* builds the KServe `ForecastRequest` of the case's `/v1/forecast` requests (one input per request: `series` as
  `[time]` or `[time][variate]`, its `timestamps` / `start_timestamp`, the family's fields as the extra fields the
  schema allows) and validates it with `ForecastRequest`;
* posts it, validates the answer with `ForecastResponse`, and checks every number against `/v1/forecast`'s answer
  to the same requests (the same JSON Lines body, on the same server): exactly, as both are the same f32 values;
  and the answer's `start_timestamp` against the first of `/v1/forecast`'s forecast `timestamps`;
* malformed and oversized requests get a 4xx whose body validates as KServe's `ErrorResponse`, its `code` the
  status, its message naming the problem.

Run by the Rust integration test `serve_timeseries`, which starts the servers:

    python tests/serve/test_kserve_timeseries.py --http HOST:PORT --cases cases.json

`cases.json` is {"model": served name, "frequency": KServe frequency, "cases": [{"name", "requests": [...],
"start": bool (continue stamps from `start_timestamp`, else send `timestamps`)}], "errors": bool (run the
malformed-request checks), "max_body_bytes": N}. Exits non-zero on the first failure, naming it; prints OK.
"""

import argparse
import importlib.util
import json
import os
import sys
import urllib.error
import urllib.request


def kserve_types():
    spec = importlib.util.find_spec("kserve")
    assert spec is not None, "kserve is not installed (scripts/setup-serve-venv.sh)"
    path = os.path.join(spec.submodule_search_locations[0], "protocol", "rest", "timeseries", "types.py")
    mod_spec = importlib.util.spec_from_file_location("kserve_timeseries_types", path)
    mod = importlib.util.module_from_spec(mod_spec)
    # registered before it runs: pydantic resolves the module's postponed annotations through sys.modules
    sys.modules[mod_spec.name] = mod
    mod_spec.loader.exec_module(mod)
    return mod


T = kserve_types()


def post(url, body, content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


FAMILY_FIELDS = ("timestamps", "future_timestamps", "columns", "id_mask")
OPTION_FIELDS = ("samples", "seed", "temperature", "top_k", "top_p", "params")


def kserve_request(model, frequency, requests, start):
    """The KServe ForecastRequest of `/v1/forecast` requests that share horizon, quantiles and sampling."""
    first = requests[0]
    inputs = []
    for r in requests:
        target = r["target"]
        multi = len(target) > 1 or "columns" in r
        series = [list(row) for row in zip(*target)] if multi else list(target[0])
        inp = {
            "type": "multivariate_time_series" if multi else "univariate_time_series",
            "name": str(r["id"]),
            "series": series,
            "frequency": frequency,
        }
        for k in FAMILY_FIELDS:
            if k in r and not (k == "timestamps" and start):
                inp[k] = r[k]
        if start:
            inp["start_timestamp"] = r["timestamps"][0]
        inputs.append(inp)
    options = {"horizon": first["horizon"]}
    if "quantiles" in first:
        options["quantiles"] = first["quantiles"]
    options.update({k: first[k] for k in OPTION_FIELDS if k in first})
    return {"model": model, "inputs": inputs, "options": options, "metadata": {"test": "kserve"}}


def filled(req):
    """`req` with its missing points (`null`, which a KServe series cannot hold) set to the point before (or 0)."""
    out = dict(req)
    rows = []
    for row in req["target"]:
        last, new = 0.0, []
        for x in row:
            last = last if x is None else x
            new.append(last)
        rows.append(new)
    out["target"] = rows
    return out


def check_case(base, model, frequency, case):
    name, requests = case["name"], [filled(r) for r in case["requests"]]
    body = kserve_request(model, frequency, requests, case["start"])
    T.ForecastRequest.model_validate(body)  # the request is KServe's
    status, raw = post(base + "/v1/timeseries/forecast", body)
    assert status == 200, f"{name}: {status} {raw[:2000]!r}"
    answer = json.loads(raw)
    resp = T.ForecastResponse.model_validate(answer)
    assert resp.status == T.Status.COMPLETED and resp.model == model, f"{name}: {answer}"
    assert len(resp.outputs) == 1 and len(resp.outputs[0].content) == len(requests), f"{name}: {answer}"
    lines = "".join(json.dumps(r) + "\n" for r in requests).encode()
    status, raw = post(base + "/v1/forecast", lines, "application/x-ndjson")
    assert status == 200, f"{name}: /v1/forecast {status} {raw[:2000]!r}"
    v1 = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    for req, got, want in zip(requests, answer["outputs"][0]["content"], v1):
        what = f"{name}/{req['id']}"
        T.TimeSeriesForecast.model_validate(got)
        point = want.get("mean") or want.get("median")
        multi = got["type"] == "multivariate_time_series"
        flat = (lambda rows: [list(s) for s in zip(*rows)]) if multi else (lambda rows: rows[0])
        assert got["mean_forecast"] == flat(point), f"{what}: mean_forecast {got['mean_forecast']} vs {point}"
        assert got["point_forecast"] == ("mean" if "mean" in want else "median"), what
        levels = {str(q["q"]): flat(q["values"]) for q in want["quantiles"]}
        assert (got.get("quantiles") or {}) == levels, f"{what}: quantiles {got.get('quantiles')} vs {levels}"
        assert got["start_timestamp"] == want["timestamps"][0], f"{what}: {got['start_timestamp']} vs {want}"
        assert got["frequency"] == frequency and got["name"] == str(req["id"]), what
        if multi:
            assert got["columns"] == req.get("columns", got["columns"]), what
        # Provenance as /v1/forecast gives it: the engine's manifest hash always, the sampler where the family has one.
        assert len(want["engine_sha256"]) == 64 and got.get("engine_sha256") == want["engine_sha256"], what
        assert got.get("sampler") == want.get("sampler"), f"{what}: sampler {got.get('sampler')} vs {want.get('sampler')}"
    print(f"{name}: {len(requests)} series equal /v1/forecast's")


def expect_error(base, what, body, status_range, needle, content_type="application/json"):
    status, raw = post(base + "/v1/timeseries/forecast", body, content_type)
    assert status_range[0] <= status <= status_range[1], f"{what}: status {status} {raw[:500]!r}"
    err = T.ErrorResponse.model_validate(json.loads(raw))
    assert err.error.code == str(status), f"{what}: code {err.error.code} vs {status}"
    assert needle in err.error.message, f"{what}: {needle!r} not in {err.error.message!r}"
    print(f"{what}: {status} {err.error.type}")


def check_errors(base, model, frequency, case, max_body_bytes):
    good = kserve_request(model, frequency, [filled(r) for r in case["requests"]], case["start"])

    def variant(**changes):
        b = json.loads(json.dumps(good))
        for path, value in changes.items():
            obj, keys = b, path.split("__")
            for k in keys[:-1]:
                obj = obj[int(k)] if k.isdigit() else obj[k]
            if value is None:
                obj.pop(keys[-1], None)
            else:
                obj[keys[-1]] = value
        return b

    expect_error(base, "not JSON", b"{nope", (400, 400), "request body")
    expect_error(base, "no horizon", variant(options__horizon=None), (400, 400), "horizon")
    expect_error(base, "unknown model", variant(model="nope"), (404, 404), "unknown model")
    expect_error(base, "a frequency KServe does not name", variant(inputs__0__frequency="fortnight"), (400, 400),
                 "frequency")
    expect_error(base, "an unknown extra field", variant(options__colour=1), (400, 400), "colour")
    expect_error(base, "rows of different widths", variant(inputs__0__type="multivariate_time_series",
                                                           inputs__0__series=[[1.0, 2.0], [3.0]]), (400, 400),
                 "row 1")
    expect_error(base, "univariate type with rows", variant(inputs__0__type="univariate_time_series",
                                                            inputs__0__series=[[1.0, 2.0], [3.0, 4.0]]),
                 (400, 400), "univariate_time_series")
    expect_error(base, "no start and no timestamps",
                 variant(inputs__0__start_timestamp=None, inputs__0__timestamps=None), (400, 400),
                 "start_timestamp")
    expect_error(base, "a text/plain body", json.dumps(good).encode(), (415, 415), "Content-Type", "text/plain")
    # just over the limit: the body still fits the socket buffers, so the client reads the 413 it gets
    over = b'{"model": "' + b"x" * max_body_bytes + b'"}'
    expect_error(base, "over --max-body-bytes", over, (413, 413), "max-body-bytes")
    one = {"type": "univariate_time_series", "name": "x", "series": [1.0, 2.0], "frequency": frequency,
           "start_timestamp": "2024-01-01T00:00:00"}
    many = variant()
    many["inputs"] = [one] * 100
    expect_error(base, "over --max-series", many, (400, 413), "--max-series")
    # one row of 20,000 values: decoded bounded, then refused by /v1/forecast's reader at --max-variates
    wide = variant(inputs__0__type="multivariate_time_series", inputs__0__series=[[0.0] * 20000])
    expect_error(base, "a row wider than --max-variates", wide, (400, 400), "--max-variates")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--cases", required=True)
    a = ap.parse_args()
    with open(a.cases) as f:
        spec = json.load(f)
    base = "http://" + a.http
    with urllib.request.urlopen(base + "/v1/timeseries/models", timeout=60) as r:
        listed = json.loads(r.read())
    assert listed == [spec["model"]], f"GET /v1/timeseries/models: {listed}"
    for case in spec["cases"]:
        check_case(base, spec["model"], spec["frequency"], case)
    if spec.get("errors"):
        check_errors(base, spec["model"], spec["frequency"], spec["cases"][0], spec["max_body_bytes"])
    print("OK")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
