# embed_ptx.py — reads PTX on stdin, writes a C header with it as one string (bench_kernels_ptx).
import sys
src = sys.stdin.read()
print("/* generated from bench/bench_kernels.cu by bench/embed_ptx.py (see the command there); do not edit */")
print("static const char bench_kernels_ptx[] =")
for line in src.splitlines():
    print('    "' + line.replace('\\', '\\\\').replace('"', '\\"') + '\\n"')
print(";")
