#!/usr/bin/env python3
"""spills.py — the register spills ptxas reports (-Xptxas -warn-spills, set by the Makefile) for the CUDA kernels,
against a committed baseline, so that a change that makes a kernel spill more is seen at build time (sixteenth
session: v47 added spills to kernels no benchmark times, found only after the final run).
  python3 dev/spills.py LOG                     the spills in a build log, one kernel per line
  python3 dev/spills.py --write BASE LOG        write them as the baseline
  python3 dev/spills.py --check BASE LOG        exit 1 when a kernel spills that did not, or spills more bytes
LOG: the output of a build that compiled src/cuda/*.cu (e.g. .ci/run's build/ci/build.log). The baseline holds
"kernel stores loads" lines for the default build (CUDA_ARCH 90a, the CI's nvcc)."""
import re
import sys

PAT = re.compile(r"Registers are spilled to local memory in function '([^']+)', (\d+) bytes spill stores, "
                 r"(\d+) bytes spill loads")


def parse(path):
    out = {}
    for line in open(path, errors="replace"):
        m = PAT.search(line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def fmt(d):
    return "".join(f"{k} {v[0]} {v[1]}\n" for k, v in sorted(d.items()))


def main(argv):
    if len(argv) == 2 and not argv[1].startswith("-"):
        sys.stdout.write(fmt(parse(argv[1])))
        return 0
    if len(argv) != 4 or argv[1] not in ("--write", "--check"):
        sys.stderr.write(__doc__)
        return 2
    base_path, log = argv[2], argv[3]
    now = parse(log)
    if argv[1] == "--write":
        open(base_path, "w").write(fmt(now))
        print(f"spills: {len(now)} spilling kernels written to {base_path}")
        return 0
    if not any("ptxas" in l or "nvcc" in l for l in open(log, errors="replace")):
        print(f"spills: {log} shows no CUDA compilation: nothing to check")
        return 0
    base = {}
    for line in open(base_path):
        f = line.split()
        if len(f) == 3:
            base[f[0]] = (int(f[1]), int(f[2]))
    worse = [k for k, v in now.items() if k not in base or v[0] > base[k][0] or v[1] > base[k][1]]
    better = [k for k, v in base.items() if k not in now or now[k][0] < v[0] or now[k][1] < v[1]]
    for k in sorted(worse):
        print(f"spills: MORE than the baseline: {k} {now[k][0]} / {now[k][1]} bytes (baseline "
              f"{base.get(k, (0, 0))[0]} / {base.get(k, (0, 0))[1]})")
    for k in sorted(better):
        print(f"spills: less than the baseline (update it with --write): {k} "
              f"{now.get(k, (0, 0))[0]} / {now.get(k, (0, 0))[1]} bytes")
    print(f"spills: {len(now)} spilling kernels, {len(worse)} more than the baseline, {len(better)} less")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
