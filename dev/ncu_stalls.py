#!/usr/bin/env python3
"""ncu_stalls.py — summarize ncu's per-SASS-instruction source page (dev tool, fourth session).

On the GPU machine:
  ncu --clock-control none -k regex:KERNEL -c 1 --section WarpStateStats --section SourceCounters -o $OUT/r BIN ARGS
  ncu -i $OUT/r.ncu-rep --page source --csv --print-source sass > $OUT/r.sass.csv
Here:
  python3 dev/ncu_stalls.py r.sass.csv[.gz] [--top N]
Prints the warp-stall reasons summed over the kernel, the instructions with the most stall samples, the executed
code by 8 KB of address (how much SASS a run touches: instruction-fetch stalls, `no_inst`, grow with it), and
for every global load / async copy the L2 sectors requested against ncu's ideal.
"""
import argparse
import collections
import csv
import gzip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt") as f:
        rows = list(csv.reader(f))
    hi = next(i for i, r in enumerate(rows) if len(r) > 2 and r[0] == "Address")
    hdr = rows[hi]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[hi + 1:] if len(r) >= len(hdr)]
    if hi > 0:
        print("kernel:", rows[0][1][:120] if len(rows[0]) > 1 else rows[0])
    S = "Warp Stall Sampling (All Samples)"
    stall = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    num = lambda r, c: int(r[ix[c]] or 0) if r[ix[c]] not in ("", "-") else 0
    total = sum(num(r, S) for r in data)
    by = collections.Counter()
    for r in data:
        for c in stall:
            by[c] += num(r, c)
    print(f"{len(data)} SASS instructions, {total} stall samples")
    for c, v in by.most_common(10):
        print(f"  {c[6:]:22s}{v:9d} {100 * v / max(total, 1):5.1f}%")
    print(f"top {args.top} instructions by stall samples:")
    for r in sorted(data, key=lambda r: -num(r, S))[: args.top]:
        why = sorted(((num(r, c), c[6:]) for c in stall), reverse=True)[:2]
        print(f"  {num(r, S):6d} {100 * num(r, S) / max(total, 1):5.1f}%  {r[1].strip()[:64]:64s} {why}")
    base = int(data[0][0], 16)
    chunks = collections.defaultdict(lambda: [0, 0, 0, 0])
    for r in data:
        k = (int(r[0], 16) - base) // 8192
        n = num(r, "Instructions Executed")
        chunks[k][0] += n
        chunks[k][1] += num(r, S)
        chunks[k][2] += n > 0
        chunks[k][3] += num(r, "stall_no_inst") if "stall_no_inst" in ix else 0
    hot = sum(v[2] for v in chunks.values())
    print(f"executed code: {hot} instructions ({hot * 16 // 1024} KB) of {len(data)} ({len(data) * 16 // 1024} KB)")
    for k in sorted(chunks):
        if chunks[k][0]:
            v = chunks[k]
            print(f"  {k * 8:5d} KB  executed {v[0]:10d}  samples {v[1]:6d}  no_inst {v[3]:6d}  hot instructions {v[2]}")
    sect = collections.defaultdict(lambda: [0, 0, 0])
    for r in data:
        op = r[1].strip().split()
        if not op:
            continue
        name = op[1] if op[0].startswith("@") and len(op) > 1 else op[0]
        if name.startswith(("LDG", "LDGSTS", "STG")) and num(r, "Instructions Executed") > 0:
            s = sect[name]
            s[0] += num(r, "L2 Theoretical Sectors Global")
            s[1] += num(r, "L2 Theoretical Sectors Global Ideal")
            s[2] += num(r, "Instructions Executed")
    if sect:
        print("global accesses: L2 sectors requested / ideal")
        for name, (got, ideal, n) in sorted(sect.items()):
            print(f"  {name:32s} {got:12d} / {ideal:12d} = {got / max(ideal, 1):.2f}  ({n} executed)")


if __name__ == "__main__":
    main()
