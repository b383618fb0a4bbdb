#!/usr/bin/env python3
"""ab_medians.py — medians of rotated A/B rounds of bench/compare.py (dev tool, thirty-eighth session).

  python3 dev/ab_medians.py DIR base tag...
reads DIR/ab_<tag>_<round>.log (compare.py's stdout of `--systems kvattn` runs, one per build and round) and prints
per case the median of kvattn's time for each build and its change against the first (base)."""
import collections
import glob
import statistics
import sys


def main():
    d, builds = sys.argv[1], sys.argv[2:]
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for b in builds:
        for f in sorted(glob.glob(f"{d}/ab_{b}_*.log")):
            case = None
            for line in open(f):
                if line.startswith(("prefill", "inflight", "decode", "spec", "shared")):
                    case = line.split("[")[0].strip()
                elif line.startswith("  kvattn") and case:
                    res[case][b].append(float(line.split()[1]))
                    case = None
    base = builds[0]
    print("| case | " + " | ".join(builds) + " |")
    print("|---" * (len(builds) + 1) + "|")
    for c, per in res.items():
        m = {b: statistics.median(per[b]) for b in builds if per[b]}
        cells = [f"{m[b]:.1f}" + ("" if b == base or base not in m else f" ({100 * (m[b] / m[base] - 1):+.1f}%)")
                 if b in m else "-" for b in builds]
        print(f"| {c} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
