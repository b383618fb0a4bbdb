#!/usr/bin/env python3
"""Compare the tile loops of kernels in nvdisasm listings (forty-eighth session).

Usage: python3 dev/sass_loops.py A.sass [B.sass] -- NAME [NAME ...]
  A.sass, B.sass: `nvdisasm -c file.cubin` output (cubins from `cuobjdump -xelf all` of attn.o or a dev binary).
  NAME: a substring naming exactly one function in each listing, e.g. bfloat16Li128ELi3ELb1ELb1ELb1ELb0ELb0EE.
For each NAME: the loops (backward branches) with at least 16 HMMA, their instruction counts, and the similarity
(difflib ratio of the opcode sequences, registers / predicates / constants / labels normalized) of the shortest such
loop (the tile loop) between the first NAME and each other NAME in A, and, with B, between A's and B's loop of the
same NAME. A ratio near 1 means the same schedule; a build whose loops differ does not time the same kernel."""
import difflib
import re
import sys


def functions(path):
    cur, out = None, {}
    for line in open(path):
        m = re.match(r'^(\S+):\s*$', line)
        if m and not m.group(1).startswith('.'):
            cur = m.group(1)
            out[cur] = []
            continue
        if cur is None:
            continue
        m = re.match(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m:
            out[cur].append((int(m.group(1), 16), m.group(2).strip()))
        m = re.match(r'^(\.L_x_\d+):', line.strip())
        if m:
            out[cur].append((None, m.group(1)))
    return out


def tile_loops(ins):
    labels = {t: i for i, (a, t) in enumerate(ins) if a is None}
    res = []
    for i, (a, t) in enumerate(ins):
        if a is None:
            continue
        m = re.search(r'BRA\s+(?:`\()?(\.L_x_\d+)', t)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            body = [x for x in ins[labels[m.group(1)]:i + 1] if x[0] is not None]
            hmma = sum(1 for _, x in body if 'HMMA' in x)
            if hmma >= 16:
                res.append((len(body), hmma, body[0][0], body))
    return sorted(res, key=lambda x: x[0])


def norm(t):
    for pat, rep in ((r'UR\d+', 'UR'), (r'R\d+', 'R'), (r'P\d', 'P'), (r'0x[0-9a-f]+', 'C'), (r'\.L_x_\d+', 'L')):
        t = re.sub(pat, rep, t)
    return t


def ratio(a, b):
    return difflib.SequenceMatcher(None, [norm(t) for _, t in a], [norm(t) for _, t in b], autojunk=False).ratio()


def main():
    if '--' not in sys.argv:
        sys.exit(__doc__)
    k = sys.argv.index('--')
    files, names = sys.argv[1:k], sys.argv[k + 1:]
    lists = [functions(f) for f in files]
    loops = []
    for fi, F in enumerate(lists):
        per = {}
        for n in names:
            hits = [f for f in F if n in f]
            if len(hits) != 1:
                sys.exit('%s: %d functions match %s' % (files[fi], len(hits), n))
            L = tile_loops(F[hits[0]])
            print('%s %s: %d instructions; loops (instructions, HMMA, start): %s' % (
                files[fi], n, len(F[hits[0]]), [(a, b, hex(c)) for a, b, c, _ in L]))
            per[n] = L[0][3] if L else []
        loops.append(per)
    for fi, per in enumerate(loops):
        for n in names[1:]:
            print('%s: %s against %s: %.3f' % (files[fi], names[0], n, ratio(per[names[0]], per[n])))
    if len(loops) == 2:
        for n in names:
            print('%s against %s, %s: %.3f' % (files[0], files[1], n, ratio(loops[0][n], loops[1][n])))


if __name__ == '__main__':
    main()
