"""totoc serve on a Kronos engine driven by the real Open Inference Protocol clients with their defaults.

tritonclient[http] sends the tensors in the binary tensor data extension and asks for binary outputs;
tritonclient[grpc] sends raw_input_contents. One series with all six columns (target FP32 [1, 6, T]), its
wall-clock seconds (timestamps INT64 [1, T], future_timestamps INT64 [1, H]) and the sampling parameters must
give bitwise what `totoc forecast` gives (greedy and sampled); bad input is INVALID_ARGUMENT naming the problem.
Run by the Rust integration test `serve_kronos::kronos_over_kserve_v2_gives_the_clis_numbers_and_refuses_bad_input`:

    python tests/serve/test_tritonclient_kronos.py --http HOST:PORT --grpc HOST:PORT --expected expected.json

`expected.json` is {name: {"request": <CLI request>, "cli": <CLI response>, "body": <the v2 JSON body>}}.
Exits non-zero on the first failure, naming it.
"""

import argparse
import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

MODEL = "toto"
DTYPES = {"FP32": np.float32, "INT64": np.int64}


def inputs(mod, body, edit=None):
    """The body's input tensors as the client's InferInputs (binary by default); `edit(name, array)` may
    change an array first."""
    out = []
    for t in body["inputs"]:
        a = np.array(t["data"], dtype=DTYPES[t["datatype"]]).reshape(t["shape"])
        if edit:
            a = edit(t["name"], a)
        i = mod.InferInput(t["name"], list(a.shape), t["datatype"])
        i.set_data_from_numpy(a)
        out.append(i)
    return out


def check(what, result, cli):
    mean = result.as_numpy("mean")
    want = np.array(cli["mean"], dtype=np.float32)[None]
    assert mean is not None and mean.shape == want.shape, f"{what}: mean shape {None if mean is None else mean.shape}"
    assert np.array_equal(mean, want), f"{what}: mean differs by {np.abs(mean - want).max()}"
    if cli["quantiles"]:
        want_q = np.array([q["values"] for q in cli["quantiles"]], dtype=np.float32)[None]
        assert np.array_equal(result.as_numpy("quantiles"), want_q), f"{what}: quantiles differ"
    if cli["samples"] is not None:
        want_s = np.array(cli["samples"], dtype=np.float32)[None]
        assert np.array_equal(result.as_numpy("samples"), want_s), f"{what}: paths differ"


def refused(c, body, edit, params, want):
    try:
        c.infer(MODEL, inputs(grpcclient, body, edit), parameters=params)
    except InferenceServerException as err:
        assert "INVALID_ARGUMENT" in str(err.status()), err
        assert want in err.message(), f"`{want}` not in {err.message()}"
        return
    raise AssertionError(f"accepted: {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--expected", required=True)
    a = ap.parse_args()
    expected = json.load(open(a.expected))
    h = httpclient.InferenceServerClient(a.http)
    g = grpcclient.InferenceServerClient(a.grpc)
    meta = g.get_model_metadata(MODEL, as_json=True)
    names = [i["name"] for i in meta["inputs"]]
    assert names == ["target", "lengths", "timestamps", "future_timestamps", "quantile_levels"], names
    for name, e in expected.items():
        body, params = e["body"], e["body"]["parameters"]
        check(f"http binary {name}", h.infer(MODEL, inputs(httpclient, body), parameters=params), e["cli"])
        check(f"grpc {name}", g.infer(MODEL, inputs(grpcclient, body), parameters=params), e["cli"])
        print(f"{name}: http binary and grpc equal totoc forecast bit for bit")
    body = expected["samples_0"]["body"]
    params = body["parameters"]

    def nan(name, x):
        if name == "target":
            x = x.copy()
            x[0, 3, 5] = np.nan
        return x

    refused(g, body, nan, params, "column `close`, row 5 is missing")
    refused(g, body, None, {**params, "timezone": "Nowhere/Atlantis"}, "not a time zone")
    refused(g, body, lambda n, x: x[:, :3] if n == "target" else x, params, "misses the `close` column")
    print("grpc bad input: INVALID_ARGUMENT with the reason")
    print("OK")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
