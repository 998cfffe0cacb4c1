"""totoc serve driven by the real Open Inference Protocol clients, with their default settings.

tritonclient[http] sends input tensors in the binary tensor data extension and asks for binary outputs by
default; tritonclient[grpc] sends raw_input_contents. Every forecast must equal what `totoc forecast` gives
for the same request and seed (on an fp32 engine: exactly). Run by the Rust integration test
`serve::tritonclient_http_and_grpc_with_their_defaults`, which starts the server and writes the CLI's answers:

    python tests/serve/test_tritonclient.py --http HOST:PORT --grpc HOST:PORT --expected expected.json

`expected.json` is {"cases": {name: {"request": <CLI request>, "cli": <CLI response>}}, "ragged": [the same for
univariate series of different lengths and one horizon]}. Exits non-zero on the first failure, naming it.
"""

import argparse
import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

MODEL = "toto"


def target_array(req):
    """[V, T] float32 with NaN for missing points."""
    return np.array([[np.nan if x is None else x for x in v] for v in req["target"]], dtype=np.float32)


def params(req):
    return {"horizon": req["horizon"], "samples": req.get("samples", 0), "seed": req.get("seed", 0)}


def inputs(mod, req, binary=True):
    """target, id_mask and quantile_levels inputs for one [V, T] request."""
    t = target_array(req)
    out = [mod.InferInput("target", list(t.shape), "FP32")]
    if mod is httpclient:
        out[0].set_data_from_numpy(t, binary_data=binary)
    else:
        out[0].set_data_from_numpy(t)
    if "id_mask" in req:
        ids = np.array(req["id_mask"], dtype=np.int64)
        out.append(mod.InferInput("id_mask", list(ids.shape), "INT64"))
        out[-1].set_data_from_numpy(ids)
    if req.get("quantiles"):
        q = np.array(req["quantiles"], dtype=np.float32)
        out.append(mod.InferInput("quantile_levels", list(q.shape), "FP32"))
        out[-1].set_data_from_numpy(q)
    return out


def check_equal(what, got, cli):
    """The server's outputs for one series against the CLI's response, exactly (fp32 engine)."""
    want = np.array(cli["mean"], dtype=np.float32)
    assert got["mean"].shape == want.shape, f"{what}: mean shape {got['mean'].shape} vs {want.shape}"
    assert np.array_equal(got["mean"], want), f"{what}: mean differs by {np.abs(got['mean'] - want).max()}"
    if cli["quantiles"]:
        want_q = np.array([q["values"] for q in cli["quantiles"]], dtype=np.float32)
        assert np.array_equal(got["quantiles"], want_q), f"{what}: quantiles differ"
        levels = np.array([q["q"] for q in cli["quantiles"]], dtype=np.float32)
        assert np.array_equal(got["quantile_levels"], levels), f"{what}: quantile levels {got['quantile_levels']}"
    if cli["samples"] is not None:
        want_s = np.array(cli["samples"], dtype=np.float32)
        assert np.array_equal(got["samples"], want_s), f"{what}: samples differ"


def outputs_of(result, names):
    return {n: result.as_numpy(n) for n in names if result.as_numpy(n) is not None}


NAMES = ["mean", "quantiles", "quantile_levels", "samples"]


def test_http_binary_defaults(url, expected):
    c = httpclient.InferenceServerClient(url)
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready(MODEL)
    assert "binary_tensor_data" in c.get_server_metadata()["extensions"]
    meta = c.get_model_metadata(MODEL)
    assert [o["name"] for o in meta["outputs"]] == NAMES, meta
    for name, e in expected.items():
        req = e["request"]
        r = c.infer(MODEL, inputs(httpclient, req), parameters=params(req))
        # Binary outputs came back (the client's default for `outputs=None` is binary_data_output).
        assert all("binary_data_size" in o.get("parameters", {}) for o in r.get_response()["outputs"]), name
        check_equal(f"http binary {name}", outputs_of(r, NAMES), e["cli"])
    print("http binary tensors: ok")


def test_http_json(url, expected):
    """JSON tensors both ways. Python's json writes a missing point as the token NaN, which totoc reads in tensor
    data as Triton does (NaN = missing): the forecast equals the binary-mode one, bit for bit."""
    c = httpclient.InferenceServerClient(url)
    nan_cases = 0
    for name, e in expected.items():
        req = e["request"]
        outs = [httpclient.InferRequestedOutput(n, binary_data=False) for n in NAMES if n != "samples" or req.get("samples")]
        outs = [o for o in outs if o.name() in ("mean", "samples") or req.get("quantiles")]
        r = c.infer(MODEL, inputs(httpclient, req, binary=False), outputs=outs, parameters=params(req))
        assert all("data" in o for o in r.get_response()["outputs"]), name
        got = outputs_of(r, NAMES)
        check_equal(f"http json {name}", got, e["cli"])
        if any(x is None for v in req["target"] for x in v):
            nan_cases += 1
            b = c.infer(MODEL, inputs(httpclient, req, binary=True), outputs=outs, parameters=params(req))
            for n, x in outputs_of(b, NAMES).items():
                assert np.array_equal(got[n], x), f"{name}: {n} differs between JSON (NaN) and binary mode"
    assert nan_cases > 0, "no case has a missing point"
    # Infinity in the target is refused by name.
    req = expected["mean_1v"]["request"]
    t = target_array(req)
    t[0, 1] = np.inf
    i0 = httpclient.InferInput("target", list(t.shape), "FP32")
    i0.set_data_from_numpy(t, binary_data=False)
    try:
        c.infer(MODEL, [i0], parameters=params(req))
        raise AssertionError("Infinity in the target was accepted")
    except InferenceServerException as err:
        assert "not finite" in str(err) and "target" in str(err), err
    print(f"http json tensors (NaN = missing in {nan_cases} cases, same as binary): ok")


def test_http_ragged_batch(url, ragged):
    """Univariate series of different lengths in one [N, 1, T] request, left-padded, with `lengths`: each gets
    exactly its own CLI forecast (the padding is not part of its context)."""
    c = httpclient.InferenceServerClient(url)
    horizon = ragged[0]["request"]["horizon"]
    ts = [target_array(e["request"]) for e in ragged]
    T = max(t.shape[1] for t in ts)
    t = np.full((len(ts), 1, T), 12345.0, dtype=np.float32)
    for i, x in enumerate(ts):
        t[i, :, T - x.shape[1]:] = x
    lengths = np.array([x.shape[1] for x in ts], dtype=np.int64)
    i0 = httpclient.InferInput("target", list(t.shape), "FP32")
    i0.set_data_from_numpy(t)
    i1 = httpclient.InferInput("lengths", list(lengths.shape), "INT64")
    i1.set_data_from_numpy(lengths)
    r = c.infer(MODEL, [i0, i1], parameters={"horizon": horizon}, request_id="batch-7")
    assert r.get_response()["id"] == "batch-7"
    mean = r.as_numpy("mean")
    assert mean.shape == (len(ts), 1, horizon), mean.shape
    for i, e in enumerate(ragged):
        check_equal(f"ragged series {i}", {"mean": mean[i]}, e["cli"])
    print("http ragged batch: ok")


def test_grpc_defaults(url, expected):
    c = grpcclient.InferenceServerClient(url)
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready(MODEL)
    meta = c.get_model_metadata(MODEL, as_json=True)
    assert [o["name"] for o in meta["outputs"]] == NAMES, meta
    for name, e in expected.items():
        req = e["request"]
        r = c.infer(MODEL, inputs(grpcclient, req), parameters=params(req))
        check_equal(f"grpc {name}", outputs_of(r, NAMES), e["cli"])
    # Errors are gRPC statuses with the reason.
    req = expected["mean_1v"]["request"]
    try:
        c.infer(MODEL, inputs(grpcclient, req), parameters={"horizon": 100000})
        raise AssertionError("horizon over the limit was accepted")
    except InferenceServerException as err:
        assert "INVALID_ARGUMENT" in str(err.status()) and "limit of 160" in err.message(), err
    try:
        c.infer("nope", inputs(grpcclient, req), parameters={"horizon": 4})
        raise AssertionError("an unknown model was accepted")
    except InferenceServerException as err:
        assert "NOT_FOUND" in str(err.status()), err
    print("grpc raw tensors: ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--expected", required=True)
    a = ap.parse_args()
    doc = json.load(open(a.expected))
    expected = doc["cases"]
    test_http_binary_defaults(a.http, expected)
    test_http_json(a.http, expected)
    test_http_ragged_batch(a.http, doc["ragged"])
    test_grpc_defaults(a.grpc, expected)
    print("OK")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
