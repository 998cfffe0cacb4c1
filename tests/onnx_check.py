"""Runs onnx.checker.check_model(full_check=True) on every graph of a totoc bundle; exit 1 on the first failure."""
import glob
import os
import sys

import onnx

bundle = sys.argv[1]
graphs = sorted(glob.glob(os.path.join(bundle, "*.onnx")))
if not graphs:
    sys.exit(f"no .onnx files in {bundle}")
for path in graphs:
    # Checking by path lets the checker resolve and validate the external weight file too.
    onnx.checker.check_model(path, full_check=True)
    print(f"onnx.checker full_check ok: {os.path.basename(path)}")
