#!/usr/bin/env python3
"""The upstream Kronos side of `totoc backtest --reference-checkpoint PREDICTOR --reference-tokenizer TOKENIZER`:
one `KronosPredictor.predict` call per window, in a loop, as a user backtesting with upstream runs it
(kronos-finance 0.1.5, CPU, `verbose=False`, `torch.manual_seed(seed)` before each window).

    backtest_kronos_reference.py --checkpoint PREDICTOR --tokenizer TOKENIZER --requests WINDOWS.jsonl
        [--threads 2] [--mode eval|train]

WINDOWS.jsonl holds one Kronos forecast request per line (the engine's own request of that window: `columns`,
`target` as read (f64), `timestamps`, `future_timestamps`, `samples`, `seed`, `sampling`, `params`) plus
`score_column`, the column the backtest scores. The request maps to upstream's call as run_kronos_reference.py
maps it (samples 0: one greedy path, top_k 1; samples N: sample_count N with the request's temperature, top_k,
top_p), and the predictor's max_context / clip are the request's params (defaults 512 / 5).

--mode eval (default): both modules in eval mode, loaded strictly (run_kronos_reference.load), what totoc
reproduces. --mode train: the same weights left in training mode, as upstream's `from_pretrained` leaves them with
huggingface_hub <= 1.8 (dropout live; the s2 query sees only window position 0): what older backtests measured.

Near-ties (eval mode, greedy windows): a window whose greedy top-1 - top-2 logit gap (s1 or s2, any step, the
decision margin of run_kronos_reference.py) or whose encoded context's smallest BSQ |z| is below MARGIN_FACTOR (100)
times the measured kernel drift (run_kronos_reference.DRIFT) could flip a token on rounding alone. Each such
window's smallest margins are returned in units of that drift (`run_kronos_reference.MarginProbe`: it keeps each
draw's logits and the encoded z during the call, and the margins are computed after the timed call), with the rule,
so `totoc backtest` can list the flagged windows and compare the others. The golden generators
(make_kronos_golden.py, regen_kronos_fixtures.py) skip such windows with the same definition.

stdout is exactly one JSON object (everything else goes to stderr):
    {"versions": {...}, "mode": "eval"|"train", "threads": N, "seconds": float,   # the predict calls only
     "window_seconds": [float, ...],
     "near_tie": {"factor": 100, "drift": {"z": float, "logits": float}},   # eval mode only
     "forecasts": [{"point": [H floats],                  # the scored column of predict's frame (the paths' mean)
                    "margins": {"z": float, "decision": float}}, ...]}   # eval mode, greedy windows: in drift units
"""

import argparse
import contextlib
import json
import os
import platform
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="the predictor's directory")
    ap.add_argument("--tokenizer", required=True, help="the tokenizer's directory")
    ap.add_argument("--requests", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mode", choices=("eval", "train"), default="eval")
    a = ap.parse_args(argv)
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the JSON only
        result = run(a.checkpoint, a.tokenizer, a.requests, a.threads, a.mode)
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


def request_for_frame(req):
    """The request as run_kronos_reference.frame / sampling read it: sampling controls at the top level."""
    out = dict(req)
    out.update(req.get("sampling") or {})
    out.pop("sampling", None)
    return out


def run(predictor_dir, tokenizer_dir, requests_path, threads, mode):
    from importlib.metadata import version

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run_kronos_reference as ref

    torch.set_num_threads(threads)
    model, tokenizer = ref.load(predictor_dir, tokenizer_dir)
    if mode == "train":
        model.train()
        tokenizer.train()
    with open(requests_path) as f:
        requests = [json.loads(line) for line in f if line.strip()]
    forecasts, times = [], []
    for i, raw in enumerate(requests):
        req = request_for_frame(raw)
        df, x_ts, y_ts = ref.frame(req)
        T, top_k, top_p, count = ref.sampling(req)
        predictor = ref.predictor_for(model, tokenizer, req)
        probe = ref.MarginProbe(tokenizer) if mode == "eval" and count == 1 and top_k == 1 else None
        torch.manual_seed(int(req.get("seed") or 0))
        with probe or contextlib.nullcontext(), torch.no_grad():
            t0 = time.perf_counter()
            pred = predictor.predict(
                df=df,
                x_timestamp=x_ts,
                y_timestamp=y_ts,
                pred_len=int(req["horizon"]),
                T=T,
                top_k=top_k,
                top_p=top_p,
                sample_count=count,
                verbose=False,
            )
            times.append(time.perf_counter() - t0)
        column = raw["score_column"]
        forecast = {"point": [float(v) for v in pred[column].to_numpy(dtype="float32")]}
        if probe is not None:
            forecast["margins"] = probe.margins(T, top_k, top_p, predictor.max_context)
        forecasts.append(forecast)
        if (i + 1) % 50 == 0:
            print(f"reference: {i + 1}/{len(requests)} windows", file=sys.stderr, flush=True)
    out = {
        "versions": {
            "kronos-finance": version("kronos-finance"),
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "mode": mode,
        "threads": threads,
        "seconds": sum(times),
        "window_seconds": times,
        "forecasts": forecasts,
    }
    if mode == "eval":
        out["near_tie"] = {"factor": ref.MARGIN_FACTOR, "drift": ref.DRIFT}
    return out


if __name__ == "__main__":
    sys.exit(main())
