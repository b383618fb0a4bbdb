#!/usr/bin/env python3
"""probe_ab.py — the graph-replay A/B summary of a device run: means over the processes of each build.

  python3 dev/probe_ab.py DIR BASE [OTHER ...]

DIR holds the outputs of `dev/split_probe.py` named probe_<build>_<n>.txt (one file per process; device scripts
rotate the builds between processes). For each shape, in the order first seen: BASE's mean (min - max over its
processes), then each OTHER's mean (min - max) and its change against BASE in percent. The device scripts of the
forty-third to forty-sixth sessions carried this as an inline heredoc (docs/perf/s43 - s46/run*.sh)."""
import collections
import glob
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d, base, others = sys.argv[1], sys.argv[2], sys.argv[3:]
    times = collections.OrderedDict()
    for f in sorted(glob.glob(os.path.join(d, "probe_*_*.txt"))):
        build = os.path.basename(f)[len("probe_"):].rsplit("_", 1)[0]
        for line in open(f):
            m = re.match(r"(\S+ D \d+ \S+( \d+)?( HND)?( varlen)?) splits auto: ([\d.]+) us", line)
            if m:
                times.setdefault(m.group(1), collections.defaultdict(list))[build].append(float(m.group(5)))
    if not times:
        sys.exit(f"probe_ab: no probe_<build>_<n>.txt results in {d}")
    for shape, v in times.items():
        if not v.get(base):
            print(f"{shape:24s} no {base} result")
            continue
        a = statistics.mean(v[base])
        row = [f"{shape:24s} {base} {a:.1f} ({min(v[base]):.1f}-{max(v[base]):.1f})"]
        for b in others:
            if v.get(b):
                q = statistics.mean(v[b])
                row.append(f"{b} {q:.1f} ({min(v[b]):.1f}-{max(v[b]):.1f}) {100 * (q / a - 1):+.1f}%")
            else:
                row.append(f"{b} -")
        print("  ".join(row))


if __name__ == "__main__":
    main()
