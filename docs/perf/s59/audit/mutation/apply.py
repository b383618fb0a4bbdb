import sys, json
# usage: apply.py mutants.json ID  -> applies the mutant (exact, unique string replacement)
muts = json.load(open(sys.argv[1]))
m = muts[sys.argv[2]]
path = m["file"]
s = open(path).read()
n = s.count(m["old"])
if n != 1:
    print(f"ERROR: old string found {n} times in {path}"); sys.exit(2)
line = s[:s.index(m["old"])].count("\n") + 1
open(path, "w").write(s.replace(m["old"], m["new"]))
print(f"{path}:{line}")
