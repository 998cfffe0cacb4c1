#!/usr/bin/env python3
"""scripts/gpu-prune-fatbin.py on a real ELF file with a synthetic .nv_fatbin section (objcopy --add-section).

    python3 tests/scripts/test_gpu_prune_fatbin.py      # unittest; needs readelf and objcopy (binutils)

The section holds two fatbins as nvcc lays them out: one with sm_80 and sm_90 cubins, one with sm_120 only, with
the 8-byte padding between them. Pruning to sm_90 must zero the other payloads and nothing else (headers, the
sm_90 payload and every byte outside the section unchanged); an architecture the file lacks and a truncated entry
must fail without writing the output.
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gpu-prune-fatbin.py")
ENTRY_HEADER = 64


def entry(arch, payload):
    # kind 2 (cubin), header size, payload size, then fields the script does not read, the arch at byte 28
    head = struct.pack("<HHIQIIHHI", 2, 0x0101, ENTRY_HEADER, len(payload), 0, 0, 0, 0, arch)
    return head + bytes(ENTRY_HEADER - len(head)) + payload


def fatbin(entries):
    body = b"".join(entry(a, p) for a, p in entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def section_bytes(path):
    out = subprocess.check_output(["readelf", "-SW", path], text=True)
    line = next(line for line in out.splitlines() if " .nv_fatbin " in line)
    fields = line.split("]", 1)[1].split()
    off, size = int(fields[3], 16), int(fields[4], 16)
    with open(path, "rb") as f:
        data = f.read()
    return data, off, size


class PruneFatbin(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="prune-fatbin-")
        self.sm80, self.sm90, self.sm120 = b"\x80" * 40, b"\x90" * 24, b"\x12" * 16
        blob = fatbin([(80, self.sm80), (90, self.sm90)]) + bytes(8) + fatbin([(120, self.sm120)])
        self.blob = blob
        self.elf = self.with_section(blob, "lib.so")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def with_section(self, blob, name):
        raw = os.path.join(self.dir, name + ".fatbin")
        with open(raw, "wb") as f:
            f.write(blob)
        elf = os.path.join(self.dir, name)
        shutil.copy("/bin/true", elf)
        subprocess.check_call(["objcopy", "--add-section", f".nv_fatbin={raw}", elf])
        return elf

    def prune(self, src, keep):
        dst = os.path.join(self.dir, "out.so")
        r = subprocess.run([sys.executable, SCRIPT, src, dst, "--keep-sm", str(keep)], capture_output=True, text=True)
        return r, dst

    def test_zeroes_other_architectures_only(self):
        r, dst = self.prune(self.elf, 90)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept 1 sm_90 entries", r.stderr)
        self.assertIn("1 fatbins hold no sm_90 code", r.stderr)
        before, off, size = section_bytes(self.elf)
        after, off2, size2 = section_bytes(dst)
        self.assertEqual((off, size), (off2, size2))
        self.assertEqual(len(before), len(after))
        # outside the section: byte for byte the same
        self.assertEqual(before[:off], after[:off])
        self.assertEqual(before[off + size :], after[off + size :])
        want = bytearray(self.blob)
        for payload in (self.sm80, self.sm120):
            i = want.find(payload)
            want[i : i + len(payload)] = bytes(len(payload))
        self.assertEqual(after[off : off + size], bytes(want))
        self.assertIn(self.sm90, after[off : off + size])

    def test_missing_architecture_fails_without_output(self):
        r, dst = self.prune(self.elf, 75)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("has no sm_75 code", r.stderr)
        self.assertFalse(os.path.exists(dst))

    def test_truncated_entry_fails(self):
        bad = bytearray(fatbin([(90, self.sm90)]))
        struct.pack_into("<Q", bad, 16 + 8, 10_000)  # the entry's payload size runs past its fatbin
        r, dst = self.prune(self.with_section(bytes(bad), "bad.so"), 90)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("malformed entry", r.stderr)
        self.assertFalse(os.path.exists(dst))

    def test_no_section_fails(self):
        plain = os.path.join(self.dir, "plain")
        shutil.copy("/bin/true", plain)
        r, dst = self.prune(plain, 90)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no .nv_fatbin section", r.stderr)


if __name__ == "__main__":
    unittest.main()
