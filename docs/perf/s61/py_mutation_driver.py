# driver.py SEED OUTNAME [ids|@file] [pytest target]  -- applies mutants one at a time to $ROOT/python/kvattn and runs tests
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutants import M
ROOT = os.environ.get("ROOT", "/tmp/mutrun")
PKG = os.path.join(ROOT, "python/kvattn")
PY = "/tmp/venv58/bin/python"
seed, outname = sys.argv[1], sys.argv[2]
env = dict(os.environ, KVATTN_LIBRARY=os.path.join(ROOT, "build/libkvattn.so"), KVATTN_TEST_SEED=seed)
only = None
if len(sys.argv) > 3 and sys.argv[3] not in ("", "all"):
    a = sys.argv[3]
    only = set(open(a[1:]).read().split()) if a.startswith("@") else set(a.split(","))
target = sys.argv[4] if len(sys.argv) > 4 else "tests/python"
orig = {f: open(os.path.join(PKG, f)).read() for f in {m[1] for m in M}}
res = []
for mid, f, old, new, desc in M:
    if only and mid not in only: continue
    src = orig[f]
    n = src.count(old)
    if n != 1:
        print(f"BAD {mid}: old occurs {n} times", flush=True); continue
    line = src[:src.index(old)].count("\n") + 1
    open(os.path.join(PKG, f), "w").write(src.replace(old, new))
    t = time.time()
    try:
        r = subprocess.run([PY, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", target],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        rc, out = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        rc, out = "timeout", ""
    finally:
        open(os.path.join(PKG, f), "w").write(src)
    killed = rc != 0
    failed = [l for l in out.splitlines() if l.startswith("FAILED") or l.startswith("ERROR")][:2]
    res.append(dict(id=mid, file=f, line=line, desc=desc, rc=rc, killed=killed, by=failed, secs=round(time.time() - t, 1)))
    print(f"{'KILLED ' if killed else 'SURVIVED'} {f}:{line} {mid} rc={rc} {failed[:1]}", flush=True)
json.dump(res, open(outname, "w"), indent=1)
print("total", len(res), "killed", sum(r["killed"] for r in res))
