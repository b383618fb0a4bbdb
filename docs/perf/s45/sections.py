#!/usr/bin/env python3
"""sections.py — stall samples and executed instructions of b98's decode tile loop by section (forty-fifth session).
  python3 docs/perf/s45/sections.py docs/perf/s45/run3/b98_12x4096.sass.csv.gz
The offsets are those of the bf16 DP 128 SELF decode kernel of 60a1594 (cuobjdump of its attn.o); another build
has other offsets."""
import collections
import csv
import gzip
import sys

SECS = [(0xef60, "wait + copies (row addresses from smem, LDGSTS)"), (0xf4c0, "next row addresses + table read"),
        (0xfdc0, "Q K^T (K ldmatrix, HMMA)"), (0x10210, "vote, scale, mask"), (0x11b50, "max + shuffles"),
        (0x11cb0, "exp, O rescale, P V"), (0x124d0, None)]
for path in sys.argv[1:]:
    rows = list(csv.reader(gzip.open(path, "rt")))
    hi = next(i for i, r in enumerate(rows) if len(r) > 2 and r[0] == "Address")
    ix = {h: i for i, h in enumerate(rows[hi])}
    data = [r for r in rows[hi + 1:] if len(r) >= len(rows[hi])]
    base = int(data[0][0], 16)
    samples, executed = collections.Counter(), collections.Counter()
    total = 0
    for r in data:
        a, s = int(r[0], 16) - base, int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)
        total += s
        for (s0, name), (s1, _) in zip(SECS, SECS[1:]):
            if s0 <= a < s1:
                samples[name] += s
                executed[name] += int(r[ix["Instructions Executed"]] or 0)
    loop = sum(samples.values())
    print(f"{path}: {total} samples, {loop} in the tile loop ({100 * loop / total:.0f}%)")
    for _, name in SECS[:-1]:
        print(f"  {name:48s} {samples[name]:6d} {100 * samples[name] / loop:5.1f}%   executed {executed[name]:9d}")
