"""CPU: one fp32 running sum per row for prefill rows (no key splits when n_q > 64/G) -> systematic error with
constant values over long caches; with v = 65504 (fp16 max) the output overflows to inf."""
import sys, os
sys.path.insert(0, os.path.dirname(__file__))
from ref64 import *
np.seterr(all="ignore")
D = 16
for dt, val, n in [("f16", 65504.0, 200_000), ("f32", 0.1, 200_000), ("f32", 0.1, 1_000_000), ("bf16", 0.1, 200_000),
                   ("f16", 0.1, 200_000)]:
    for nq, ns in [(65, 0), (1, 1), (1, 0)]:
        q = np.zeros((1, nq, 1, D))            # all scores 0: uniform softmax
        k = np.zeros((1, n, 1, D)); v = np.full((1, n, 1, D), val)
        out, lse = run(q, k, v, [n], dtype=dt, num_splits=ns)[:2]
        exact = float(np.asarray(val).astype(DT[dt]).astype(np.float64))   # out must equal v exactly
        o = out[0, -1, 0, 0]
        print(f"{dt:4s} v={val:<8g} keys={n:<8d} n_q={nq:<3d} num_splits={ns}: out={o!r:<22} exact={exact!r:<22} "
              f"rel.err={abs(o-exact)/exact:.2e}  lse={lse[0,0,-1]:.6f} (exact {np.log(n):.6f})")
