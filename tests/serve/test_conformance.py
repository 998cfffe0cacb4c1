"""totoc serve's Open Inference Protocol conformance, driven by the real tritonclient clients.

Run by the Rust integration test `serve_ops::conformance_with_the_real_clients`, which starts the server with a
long queue delay (every request waits in the queue for it) and writes one CLI request:

    python tests/serve/test_conformance.py --http HOST:PORT --grpc HOST:PORT --request request.json

Checks: a gRPC deadline shorter than the queue delay is answered by the server with DEADLINE_EXCEEDED (its own
message, not the client giving up); REST `"outputs": []` returns every output, as gRPC with no outputs does;
an output named twice is refused the same way on both (400 / INVALID_ARGUMENT). Exits non-zero on the first
failure, naming it.
"""

import argparse
import json
import sys
import urllib.error
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

MODEL = "toto"


def grpc_inputs(req):
    t = np.array([[np.nan if x is None else x for x in v] for v in req["target"]], dtype=np.float32)
    i = grpcclient.InferInput("target", list(t.shape), "FP32")
    i.set_data_from_numpy(t)
    return [i]


def grpc_params(req):
    return {"horizon": req["horizon"]}


def test_grpc_deadline(url, req):
    client = grpcclient.InferenceServerClient(url)
    try:
        client.infer(MODEL, grpc_inputs(req), parameters=grpc_params(req), client_timeout=0.5)
    except InferenceServerException as e:
        assert e.status() == "StatusCode.DEADLINE_EXCEEDED", f"grpc deadline: status {e.status()}: {e.message()}"
        # The server's own answer names its deadline; a client giving up says only "Deadline Exceeded".
        assert "grpc-timeout" in e.message() or "deadline of" in e.message(), f"grpc deadline: {e.message()}"
    else:
        raise AssertionError("grpc deadline: a call past its deadline was answered")
    print("grpc deadline: DEADLINE_EXCEEDED from the server")


def rest(url, body):
    r = urllib.request.Request(
        f"http://{url}/v2/models/{MODEL}/infer",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(r, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def rest_body(req, outputs):
    target = [[x for x in v] for v in req["target"]]
    return {
        "inputs": [{"name": "target", "shape": [len(target), len(target[0])], "datatype": "FP32", "data": target}],
        "parameters": grpc_params(req),
        "outputs": outputs,
    }


def test_empty_outputs(http, grpc, req):
    status, body = rest(http, rest_body(req, []))
    assert status == 200, f"REST outputs []: {status} {body}"
    rest_names = sorted(o["name"] for o in body["outputs"])
    result = grpcclient.InferenceServerClient(grpc).infer(MODEL, grpc_inputs(req), parameters=grpc_params(req))
    grpc_names = sorted(o.name for o in result.get_response().outputs)
    assert rest_names == grpc_names and rest_names, f"REST outputs [] gave {rest_names}, gRPC {grpc_names}"
    print(f"outputs []: REST and gRPC both return {rest_names}")


def test_duplicate_outputs(http, grpc, req):
    status, body = rest(http, rest_body(req, [{"name": "mean"}, {"name": "mean"}]))
    assert status == 400 and "twice" in body.get("error", ""), f"REST duplicate outputs: {status} {body}"
    outs = [grpcclient.InferRequestedOutput("mean"), grpcclient.InferRequestedOutput("mean")]
    try:
        grpcclient.InferenceServerClient(grpc).infer(
            MODEL, grpc_inputs(req), parameters=grpc_params(req), outputs=outs
        )
    except InferenceServerException as e:
        assert e.status() == "StatusCode.INVALID_ARGUMENT" and "twice" in e.message(), f"gRPC duplicate: {e}"
    else:
        raise AssertionError("gRPC duplicate outputs were answered")
    print("duplicate output names: refused on REST (400) and gRPC (INVALID_ARGUMENT)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--request", required=True)
    a = ap.parse_args()
    with open(a.request) as f:
        req = json.load(f)
    test_grpc_deadline(a.grpc, req)
    test_empty_outputs(a.http, a.grpc, req)
    test_duplicate_outputs(a.http, a.grpc, req)
    print("OK")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
