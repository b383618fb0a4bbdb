"""CPU split merge with huge, tied scores (the CUDA lse-only merge broke here until the fifty-fourth session: cuda_split_merge_model.py)."""
import sys, os
sys.path.insert(0, os.path.dirname(__file__))
from ref64 import *
rng = np.random.default_rng(3)
D = 64
for S in [1e5, 1e6, 1e8]:
    for dt in ["f16", "bf16", "f32"]:
        q = np.zeros((1, 1, 1, D)); q[..., 0] = 1.0
        k = np.zeros((1, 128, 1, D)); k[0, :, 0, 0] = -1.0; k[0, 0, 0, 0] = 1.0; k[0, 64:, 0, 0] = 1.0
        v = np.zeros((1, 128, 1, D)); v[0, 0] = 1.0
        compare(f"S={S:g}: piece A 1 key at S (v=1), piece B 64 keys at S (v=0), splits 2", q, k, v, [128], dtype=dt,
                scale=S, num_splits=2)
for S in [1e6, 1e8]:
    q = np.zeros((1, 1, 1, D)); q[..., 0] = 1.0
    k = np.zeros((1, 3072, 1, D)); k[0, :, 0, 0] = 1.0; v = np.ones((1, 3072, 1, D))
    for ns in [0, 3, 8]:
        compare(f"S={S:g}: 3072 tied keys, v=1, num_splits={ns}", q, k, v, [3072], dtype="bf16", scale=S, num_splits=ns)
