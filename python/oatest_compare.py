"""The inconsistency rule of oatest's oracle (src/oracle/compare.rs), for repro.py and exported regression suites
(oatest embeds this file in both; it needs only numpy, imported where used so that a script embedding it can
still say that numpy is missing).

Floats: |a-b| <= atol + rtol*|ref| with the tolerance table's per-dtype (atol, rtol) (complex: each part, by its
float type); float16/bfloat16 also pass within `ulps` ULPs; where the reference is NaN or +-Inf the other side must
be the same kind. Integers: exact, except outputs of quantized ops (the indices in `quantized`), which may differ by
`steps` quantization steps; floats of dequantized outputs (`dequantized`: index -> size of a step) may also differ
by `steps` steps (plus atol + rtol*|ref|). Other types: equal or structurally different.
"""
COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}
SIXTEEN_BIT = ("float16", "bfloat16")


def _ulps16(e, a):
    """ULP distances of two 16-bit float arrays (sign-magnitude bit patterns, so +0 and -0 are 0 apart)."""
    import numpy as np

    def key(x):
        bits = np.ascontiguousarray(x).view(np.uint16).astype(np.int64)
        return np.where(bits & 0x8000, -(bits & 0x7FFF), bits & 0x7FFF)

    return np.abs(key(e) - key(a))


def _float_parts(e, a, table, name, step):
    """(reference, over, diff, ulps and steps of the finite pairs or None) as flat arrays, one entry per compared
    part; `step` is the size of a quantization step of a dequantized output (else None)."""
    import numpy as np

    kind = COMPLEX_PARTS.get(name, name)
    atol, rtol = table[kind]
    if name in COMPLEX_PARTS:
        e = np.stack([e.real, e.imag], axis=-1)
        a = np.stack([a.real, a.imag], axis=-1)
    r, o = e.astype(np.float64).ravel(), a.astype(np.float64).ravel()
    finite = np.isfinite(r) & np.isfinite(o)
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(r - o)
        same_kind = np.where(np.isnan(r), np.isnan(o), np.where(np.isinf(r), o == r, False))
        diff = np.where(finite, gap, np.where(same_kind, 0.0, np.inf))
        close = gap <= atol + rtol * np.abs(r)
        steps = None
        if step is not None:
            close = close | (gap <= table["steps"] * step + atol + rtol * np.abs(r))
            steps = np.floor(diff / step + 0.5)[finite]
    ulps = None
    if name in SIXTEEN_BIT:
        ulps = _ulps16(e.ravel(), a.ravel())
        close = close | (ulps <= table["ulps"])
        ulps = ulps[finite]
    over = np.where(finite, ~close, diff > 0)
    return r, over, diff, ulps, steps


def _int_parts(e, a, quantized, steps):
    import numpy as np

    if e.dtype.itemsize < 8:
        r, o = e.astype(np.int64).ravel(), a.astype(np.int64).ravel()
    else:  # 64-bit integers exactly, as Python ints
        r, o = e.astype(object).ravel(), a.astype(object).ravel()
    gap = np.abs(r - o)
    over = gap > steps if quantized else gap != 0
    return r.astype(np.float64), over.astype(bool), gap.astype(np.float64)


def measure(expected, actual, table, quantized=(), dequantized=None):
    """How far `actual` (a list of arrays) is from `expected`, under `table` ({dtype: [atol, rtol], "ulps",
    "steps"}), with `quantized` the indices of outputs of quantized ops and `dequantized` {index: step} those of
    dequantized ones: None when they cannot be compared
    element by element (count, dtype, shape or a non-numeric output differ), else a dict with max_abs, max_rel,
    ulps, steps (None when no such output), exceeding and elements (beyond the tolerance / compared)."""
    import numpy as np

    m = {"max_abs": 0.0, "max_rel": 0.0, "ulps": None, "steps": None, "exceeding": 0, "elements": 0}
    if len(expected) != len(actual):
        return None
    for k, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape or e.dtype != a.dtype:
            return None
        name = e.dtype.name
        if name in table or name in COMPLEX_PARTS:
            step = (dequantized or {}).get(k) if name in table else None
            r, over, diff, ulps, steps = _float_parts(e, a, table, name, step)
            if ulps is not None and ulps.size:
                m["ulps"] = max(m["ulps"] or 0, int(ulps.max()))
            if steps is not None and steps.size:
                m["steps"] = max(m["steps"] or 0, int(steps.max()))
        elif e.dtype.kind in "iub":
            q = k in quantized and e.dtype.kind != "b"
            r, over, diff = _int_parts(e, a, q, table["steps"])
            if q and diff.size:
                m["steps"] = max(m["steps"] or 0, int(diff.max()))
        else:
            if not np.array_equal(e, a):
                return None
            continue
        if name in COMPLEX_PARTS:
            over = over.reshape(-1, 2).any(axis=1)
        m["elements"] += int(over.size)
        m["exceeding"] += int(over.sum())
        if diff.size:
            m["max_abs"] = max(m["max_abs"], float(diff.max()))
            rel = (r != 0) & np.isfinite(r)
            if rel.any():
                m["max_rel"] = max(m["max_rel"], float((diff[rel] / np.abs(r[rel])).max()))
    return m


def describe(m):
    """The measurement in the words of oatest's verdicts."""
    if m is None:
        return "outputs differ in count, dtype, shape or a non-numeric value"
    s = f"max |diff| {m['max_abs']:e}, max rel {m['max_rel']:e}"
    if m["ulps"] is not None:
        s += f", {m['ulps']} ULPs"
    if m["steps"] is not None:
        s += f", {m['steps']} quantization steps"
    return s + f"; {m['exceeding']} of {m['elements']} elements beyond tolerance"


def inconsistent(m):
    return m is None or m["exceeding"] > 0
