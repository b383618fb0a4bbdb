#!/usr/bin/env python3
"""Compare rounds of `bench_cuda --quick` logs of several builds (dev/device_variants.sh writes <tag><round>.txt).

    python3 dev/ab_compare.py [--mean] DIR base tag1 [tag2 ...]

A tag must not be another tag followed by digits (v6 and v64: v641.txt would read as v6's round 641).

Per row (decode shapes and layouts, the inflight step, prefill): the median over rounds (--mean: the mean) of the
isolated and back-to-back times of each build, and each build's change against the base. The last lines give the
mean change over the attention rows, and the same over the "plain read" rows: the plain read is the same kernel in
every build, so its spread is a floor for the noise of the comparison. (Twenty-second session: kernels of identical
SASS, 15 rows, came out 1.3% apart isolated and 0.3% back to back in three rounds run in a fixed order, the base
first; 0.15% / 0.05% in six rounds in rotated order. dev/device_variants.sh now rotates the order.)
"""
import glob
import os
import re
import statistics
import sys

ROW = re.compile(r'\s*(\d+x\d+)\s+(contiguous|paged \d+|plain read)\s+([\d.]+)\s+[\d.]+\s+[\d.]+%\s+([\d.]+)')
INFLIGHT = re.compile(r'isolated ([\d.]+) us.*back-to-back ([\d.]+) us')
PREFILL = re.compile(r'\s*(\d+x\d+)\s+([\d.]+)\s+([\d.]+)\s+ok')


def parse(path):
    rows, section = {}, 0
    for line in open(path):
        m = re.match(r'\((\d)\)', line)
        if m:
            section = int(m.group(1))
            continue
        if section == 1:
            m = ROW.match(line)
            if m:
                rows[(m.group(1), m.group(2))] = (float(m.group(3)), float(m.group(4)))
        elif section == 2:
            m = INFLIGHT.search(line)
            if m:
                rows[('inflight', '')] = (float(m.group(1)), float(m.group(2)))
        elif section == 3:
            m = PREFILL.match(line)
            if m:  # ms (lower is better, like the other rows)
                rows[('prefill', m.group(1))] = (float(m.group(2)) * 1e3, float('nan'))
    return rows


def main(argv):
    mean = '--mean' in argv
    argv = [a for a in argv if a != '--mean']
    if len(argv) < 3:
        sys.exit(__doc__)
    folder, tags = argv[0], argv[1:]
    runs = {}
    for t in tags:
        files = sorted(f for f in glob.glob(os.path.join(folder, t + '*.txt'))
                       if re.fullmatch(re.escape(t) + r'\d+\.txt', os.path.basename(f)))
        if not files:
            sys.exit('no logs for tag %s in %s' % (t, folder))
        runs[t] = [parse(f) for f in files]
    pick = statistics.mean if mean else statistics.median
    keys = [k for k in runs[tags[0]][0] if all(k in r for t in tags for r in runs[t])]
    print('%-22s' % 'row (us)' + ''.join('%20s' % ('%s (%d)' % (t, len(runs[t]))) for t in tags) +
          '   change: isolated / back-to-back')
    change = {t: {'attn': [], 'plain': []} for t in tags[1:]}
    for k in keys:
        vals = []
        for t in tags:
            iso = pick([r[k][0] for r in runs[t]])
            b2b = pick([r[k][1] for r in runs[t]])
            vals.append((iso, b2b))
        line = '%-22s' % ' '.join(k).strip() + ''.join(
            '%11.1f /%7s' % (v[0], '-' if v[1] != v[1] else '%.1f' % v[1]) for v in vals)
        for t, v in zip(tags[1:], vals[1:]):
            d_iso = (v[0] / vals[0][0] - 1) * 100
            d_b2b = (v[1] / vals[0][1] - 1) * 100 if v[1] == v[1] else float('nan')
            change[t]['plain' if k[1] == 'plain read' else 'attn'].append((d_iso, d_b2b))
            line += '   %s %+5.1f%% / %+5.1f%%' % (t, d_iso, d_b2b)
        print(line)
    for t in tags[1:]:
        for kind, label in (('attn', 'attention rows'), ('plain', 'plain read (noise floor)')):
            c = change[t][kind]
            if not c:
                continue
            b2b = [x[1] for x in c if x[1] == x[1]]
            print('%s vs %s, %s: mean %+.2f%% isolated (worst %+.1f%%), %+.2f%% back-to-back' % (
                t, tags[0], label, statistics.mean(x[0] for x in c), max(x[0] for x in c),
                statistics.mean(b2b) if b2b else float('nan')))


if __name__ == '__main__':
    main(sys.argv[1:])
