#!/usr/bin/env python3
"""sass_size.py — SASS instructions per kernel of a cubin, read from its ELF .text sections (dev tool; this
machine has nvcc and ptxas but no cuobjdump / nvdisasm).
  nvcc -O3 -std=c++17 -DKVATTN_SM90A=1 -Iinclude -Isrc --expt-relaxed-constexpr -cubin \
       -gencode arch=compute_90a,code=sm_90a src/cuda/attn.cu -o /tmp/attn.cubin
  python3 dev/sass_size.py /tmp/attn.cubin [substring]
Every sm_90 instruction is 16 bytes."""
import struct
import sys


def text_sections(path):
    d = open(path, "rb").read()
    if d[:4] != b"\x7fELF" or d[4] != 2:
        raise SystemExit(f"{path}: not a 64-bit ELF (cubin)")
    shoff = struct.unpack_from("<Q", d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx][4]
    for s in secs:
        name = d[names + s[0]: d.index(b"\0", names + s[0])].decode()
        if name.startswith(".text."):
            yield name[6:], s[5]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    sub = sys.argv[2] if len(sys.argv) > 2 else ""
    for name, size in sorted(text_sections(sys.argv[1]), key=lambda x: -x[1]):
        if sub in name:
            print(f"{size // 16:8d} instructions  {size // 1024:5d} KB  {name}")


if __name__ == "__main__":
    main()
