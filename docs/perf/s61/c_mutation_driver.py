#!/usr/bin/env python3
"""Mutation driver for kvattn's validate.c / pages.c / api.c (CPU-only build).
usage: driver.py [--check] [--stage2] [ids...]
Applies one mutant at a time to /tmp/cmut/src, rebuilds the library + test binaries (make, BUILD=build, NVCC=),
runs the tests with KVATTN_TEST_QUICK=1, records results as JSON lines in /tmp/cmut_results/results.jsonl."""
import json, os, subprocess, sys, time

REPO = "/tmp/cmut"
RES = "/tmp/cmut_results"
MAKE = ["make", "BUILD=build", "NVCC=", "CPU_ARCH=-march=x86-64-v2", "-j2"]
STAGE1 = ["test_bad_input", "test_overlap", "test_pages", "test_default_strides", "test_big_offsets", "test_silent",
          "test_cuda_arch", "test_inflight", "test_fuzz_bad_data", "test_grid"]
STAGE2 = ["test_cpu_limits", "test_rounding", "test_huge_scores", "test_fp16_max"]
exec(open(os.path.join(RES, "mutants.py")).read())

def locate(src, mu):
    k = src.count(mu["old"])
    if mu["nth"] is None and k != 1:
        raise SystemExit(f"{mu['id']}: anchor occurs {k} times")
    pos = src.find(mu["old"]) if mu["nth"] is None else [i for i in range(len(src)) if src.startswith(mu["old"], i)][mu["nth"]]
    # line of the first changed character
    j = 0
    while j < min(len(mu["old"]), len(mu["new"])) and mu["old"][j] == mu["new"][j]: j += 1
    return pos, src.count("\n", 0, pos + j) + 1

def run(cmd, timeout, env=None):
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", ""

def restore():
    subprocess.run(["git", "checkout", "-q", "--", "src"], cwd=REPO, check=True)

def main():
    args = sys.argv[1:]
    check = "--check" in args; stage2 = "--stage2" in args
    ids = [a for a in args if not a.startswith("--")]
    todo = [mu for mu in M if not ids or mu["id"] in ids]
    if check:
        for mu in todo:
            src = open(os.path.join(REPO, mu["file"])).read()
            _, line = locate(src, mu)
            print(mu["id"], f"{mu['file']}:{line}", mu["desc"])
        return
    tests = STAGE2 if stage2 else STAGE1
    FULL = ["test_bad_input", "test_overlap", "test_pages", "test_default_strides", "test_fuzz_bad_data", "test_inflight"]
    out = open(os.path.join(RES, "results_stage2.jsonl" if stage2 else "results.jsonl"), "a")
    env = dict(os.environ, KVATTN_TEST_QUICK="1", OMP_NUM_THREADS="2")
    for mu in todo:
        restore()
        path = os.path.join(REPO, mu["file"])
        src = open(path).read()
        pos, line = locate(src, mu)
        open(path, "w").write(src[:pos] + mu["new"] + src[pos + len(mu["old"]):])
        t0 = time.time()
        rc, log = run(MAKE + ["build/" + t for t in (tests + (FULL + ["decode_step"] if stage2 else []))], 600)
        rec = dict(id=mu["id"], file=mu["file"], line=line, desc=mu["desc"], old=mu["old"], new=mu["new"])
        if rc != 0:
            rec["status"] = "stillborn"; rec["build_log"] = log[-2000:]
        else:
            failed = {}
            for t in tests:
                trc, tlog = run(["./build/" + t], 300, env)
                if trc != 0:
                    fails = [l for l in tlog.splitlines() if "FAIL" in l or "fail" in l.lower()][:6]
                    failed[t] = dict(rc=trc, summary=(tlog.strip().splitlines() or [""])[-1][:200], first=fails)
            if stage2:
                for t in FULL + ["decode_step"]:  # without KVATTN_TEST_QUICK: the full randomized grids
                    trc, tlog = run(["./build/" + t], 600, dict(os.environ, OMP_NUM_THREADS="2"))
                    if trc != 0:
                        failed[t + "(full)"] = dict(rc=trc, summary=(tlog.strip().splitlines() or [""])[-1][:200])
            rec["status"] = "killed" if failed else "survived"
            rec["killed_by"] = failed
        rec["secs"] = round(time.time() - t0, 1)
        print(rec["id"], rec["status"], f"{rec['file']}:{line}", rec["desc"], "|", ",".join(rec.get("killed_by", {}).keys()), flush=True)
        out.write(json.dumps(rec) + "\n"); out.flush()
    restore()
    run(MAKE + ["build/" + t for t in STAGE1 + STAGE2], 600)  # leave the tree built from the original sources

if __name__ == "__main__":
    main()
