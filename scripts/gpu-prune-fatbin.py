#!/usr/bin/env python3
"""Zeroes the GPU code of every architecture but one in a shared library's .nv_fatbin section.

    gpu-prune-fatbin.py SRC DST --keep-sm 90

Why: onnxruntime-gpu 1.31.1's libonnxruntime_providers_cuda.so is 284 MB, 218 MB of it the CUDA kernels for
sm_75, 80, 86, 89, 90 and 120 (no PTX). A machine reached only through a 64 MiB-per-call copy (the lent GPU,
scripts/gpu-pack.sh) needs the one architecture it runs: zeroing the other cubins' bytes keeps every offset,
header and symbol of the file (nothing is moved, so the ELF stays valid) and makes them compress to nothing
(xz: 186 MB -> about 50 MB). The CUDA driver picks the cubin whose header names the device's architecture and
never reads the others' payloads. The result runs only on GPUs of the kept architecture: it is a transport
format for one machine, not something to ship.

Fatbin layout (as written by nvcc/fatbinary; read-only fields only): a 16-byte header (magic 0xBA55ED50, u16
version, u16 header size, u64 size of the entries), then entries, each a header (u16 kind, u16, u32 header size,
u64 payload size, ..., u32 sm architecture at byte 28) and its payload. Exits non-zero, writing nothing, when the
section is missing, a header is malformed, or no entry of the kept architecture exists.
"""

import argparse
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50


def fatbin_section(path):
    """(file offset, size) of .nv_fatbin, from readelf's section table."""
    out = subprocess.check_output(["readelf", "-SW", path], text=True)
    for line in out.splitlines():
        if " .nv_fatbin " in line:
            fields = line.split("]", 1)[1].split()
            return int(fields[3], 16), int(fields[4], 16)
    sys.exit(f"gpu-prune-fatbin: {path} has no .nv_fatbin section (not a CUDA library?)")


def prune(data, start, end, keep):
    """Zeroes, in place, the payload of every entry whose architecture is not `keep`; returns byte counts."""
    stats = {"kept": 0, "zeroed": 0, "kept_entries": 0, "fatbins": 0, "fatbins_without_keep": 0}
    pos = start
    while pos + 16 <= end:
        magic, _version, header_size, entries_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8  # the section pads fatbins to 8 bytes
            continue
        stats["fatbins"] += 1
        entry, fat_end = pos + header_size, pos + header_size + entries_size
        if fat_end > end:
            sys.exit(f"gpu-prune-fatbin: fatbin at {pos:#x} runs past its section")
        has_keep = False
        while entry < fat_end:
            _kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            (arch,) = struct.unpack_from("<I", data, entry + 28)
            body = entry + entry_header
            if entry_header < 32 or body + payload > fat_end:
                sys.exit(f"gpu-prune-fatbin: malformed entry at {entry:#x}")
            if arch == keep:
                has_keep = True
                stats["kept"] += payload
                stats["kept_entries"] += 1
            else:
                data[body : body + payload] = bytes(payload)
                stats["zeroed"] += payload
            entry = body + payload
        stats["fatbins_without_keep"] += not has_keep
        pos = fat_end
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--keep-sm", type=int, required=True, help="the architecture to keep, e.g. 90 for H100/H200")
    a = ap.parse_args()
    start, size = fatbin_section(a.src)
    data = bytearray(open(a.src, "rb").read())
    stats = prune(data, start, start + size, a.keep_sm)
    if stats["kept_entries"] == 0:
        sys.exit(f"gpu-prune-fatbin: {a.src} has no sm_{a.keep_sm} code: this library cannot run on that GPU")
    with open(a.dst, "wb") as f:
        f.write(data)
    print(
        f"gpu-prune-fatbin: {stats['fatbins']} fatbins, kept {stats['kept_entries']} sm_{a.keep_sm} entries "
        f"({stats['kept'] / 1e6:.1f} MB), zeroed {stats['zeroed'] / 1e6:.1f} MB; "
        f"{stats['fatbins_without_keep']} fatbins hold no sm_{a.keep_sm} code (kernels for other GPUs only)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
