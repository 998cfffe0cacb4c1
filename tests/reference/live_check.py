"""The live reference check's comparison: a regenerated reference (a) against the committed one (b), every number
held to a tolerance in its own scale.

Each number belongs to a quantity class with a unit:
* scaled units (toto-ts's mixture parameters, toto-2's raw head knots): unit 1 (the model's inputs are scaled to
  σ ≈ 1); toto-ts's scaled input `patches` add |scaler_loc|/scaler_scale, the f32 rounding of `(x − loc)/scale`
  of a raw value near a large offset;
* series units (forecasts, scaler statistics, samples): unit s_v, the variate's largest scaler scale, so a drift of
  the model's scaled output maps to a drift of s_v times it.
The drift of a number is m = |a − b| / (unit + |b|) (the |b| term is its own f32 rounding); the check holds when
m ≤ τ of its class. Every τ is the worst drift measured over the kernel settings of `kernels.SETTINGS` times a safety
factor (`kernel_drift.py` measures them and prints the table in docs/guide.md, "CPUs").

Every number is compared (not only up to the first failure), so a failing check names the worst one: its file, JSON
path, class, both values and |diff|/tolerance.
"""

import json

SAFETY_FACTOR = 4


class Mismatch(Exception):
    pass


class Tally:
    """The worst drift per class over one file, and the numbers over their tolerance.

    `totoc_tol(b)` (optional, per number) is the tolerance totoc's own tests hold the same number to against the
    fixture; the tally keeps the largest live tolerance / totoc tolerance ratio, so the report can say how much
    tighter the oracle is held than totoc."""

    def __init__(self, taus):
        self.taus = taus
        self.worst = {c: (0.0, "-") for c in taus}
        self.totoc_ratio = {c: 0.0 for c in taus}
        self.over = []
        self.max_abs = (0.0, "-")

    def add(self, cls, path, a, b, unit, totoc_tol=None):
        d = abs(a - b)
        m = d / (unit + abs(b))
        if d > self.max_abs[0]:
            self.max_abs = (d, path)
        if m > self.worst[cls][0]:
            self.worst[cls] = (m, path)
        tau = self.taus[cls]
        if totoc_tol is not None and totoc_tol > 0:
            self.totoc_ratio[cls] = max(self.totoc_ratio[cls], tau * (unit + abs(b)) / totoc_tol)
        if m > tau:
            self.over.append((m / tau, path, a, b, cls, unit))

    def merge(self, other):
        for c in self.taus:
            if other.worst[c][0] > self.worst[c][0]:
                self.worst[c] = other.worst[c]
            self.totoc_ratio[c] = max(self.totoc_ratio[c], other.totoc_ratio[c])
        self.over += other.over
        if other.max_abs[0] > self.max_abs[0]:
            self.max_abs = other.max_abs

    def ratio(self):
        """The worst |diff|/tolerance over every class, and where."""
        return max(((m / self.taus[c], p) for c, (m, p) in self.worst.items()), default=(0.0, "-"))

    def failure(self):
        """None when every number is within its tolerance; else a message naming the worst one."""
        if not self.over:
            return None
        r, path, a, b, cls, unit = max(self.over, key=lambda o: o[0])
        return (
            f"{path} ({cls}): {a!r} (regenerated) vs {b!r} (committed), |diff| {abs(a - b):.3g}, "
            f"|diff|/tolerance {r:.3g} (tolerance {self.taus[cls]:g}·(unit {unit:.3g} + |b|)); "
            f"{len(self.over)} number(s) over"
        )


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def numbers(a, b, path, idx=()):
    """Yields (path, idx, a, b) for every number of b, in order (idx: the list indices on the way there); raises
    Mismatch on any difference of structure, type or of a non-number leaf. Integers must be equal unless the
    regenerated one is a float."""
    if isinstance(b, dict):
        if not isinstance(a, dict) or sorted(a) != sorted(b):
            raise Mismatch(f"{path}: keys differ ({sorted(a) if isinstance(a, dict) else type(a).__name__} vs {sorted(b)})")
        for k in sorted(b):
            yield from numbers(a[k], b[k], f"{path}.{k}", idx)
    elif isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            raise Mismatch(f"{path}: length differs")
        for i, (x, y) in enumerate(zip(a, b)):
            yield from numbers(x, y, f"{path}[{i}]", idx + (i,))
    elif isinstance(b, float) or (_is_number(b) and isinstance(a, float)):
        if not _is_number(a):
            raise Mismatch(f"{path}: type differs")
        yield path, idx, float(a), float(b)
    elif a != b or type(a) is not type(b):
        raise Mismatch(f"{path}: {a!r} (regenerated) vs {b!r} (committed)")


def judge(label, compare, identical, total, failures):
    """Runs `compare()` (-> Tally) for the case `label`, merges it into `total`, and prints its line: MISMATCH (also
    appended to `failures`) or its worst |diff|/tolerance."""
    try:
        tally = compare()
    except Mismatch as e:
        failures.append(f"{label}: {e}")
        print(f"{'MISMATCH':>14}  {label}: {e}")
        return
    total.merge(tally)
    bad = tally.failure()
    if bad:
        failures.append(f"{label}: {bad}")
        print(f"{'MISMATCH':>14}  {label}: {bad}")
        return
    r, at = tally.ratio()
    tag = "bit-identical" if identical else "within tol"
    print(f"{tag:>14}  {label}  max |diff|/tolerance {r:.3g} at {at}")


def write_report(path, check, tally):
    """The worst drift per class as JSON (kernel_drift.py reads it)."""
    doc = {
        "check": check,
        "classes": {
            c: {
                "worst": m,
                "at": at,
                "tau": tally.taus[c],
                "live_over_totoc": tally.totoc_ratio[c] or None,
            }
            for c, (m, at) in tally.worst.items()
        },
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


def sigma(row):
    """Population standard deviation of a context row's present points (totoc's `compare::context_sigma`)."""
    xs = [float(x) for x in row if x is not None]
    if len(xs) < 2:
        return 0.0
    mean = sum(xs) / len(xs)
    return (sum((x - mean) ** 2 for x in xs) / len(xs)) ** 0.5
