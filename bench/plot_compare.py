#!/usr/bin/env python3
"""plot_compare.py — PNG plots from bench/compare.py's compare.json (matplotlib, no display needed).

  python3 bench/plot_compare.py compare.json [--out DIR]

decode_bandwidth.png: effective TB/s vs B x L, one panel per cache layout (GQA 32/8, D 128), one line per system;
prefill_tflops.png: TFLOP/s vs L, one panel per head dim, one line per system;
steps.png: time of the inflight, speculative and shared-prefix steps, one bar per system.
"""
import json
import os
import sys

COLORS = {"kvattn": "tab:red", "fa2": "tab:blue", "fa2-varlen": "tab:cyan", "cudnn": "tab:green",
          "flex": "tab:purple", "flashinfer": "tab:orange", "flashinfer-cascade": "tab:brown"}



def _legend_all(fig, axes):
    """One legend for the whole figure with every system drawn in any panel (panels differ in who could run)."""
    seen = {}
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(l, h)
    if seen:
        axes[-1].legend(list(seen.values()), list(seen.keys()), fontsize=8)

def _ok(r):
    return r.get("status") == "ok" and r.get("time_ms")


def _systems(cases):
    names = []
    for c in cases:
        for n in c.get("results", {}):
            if n not in names:
                names.append(n)
    return names


def make_plots(doc, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    cases = [c for c in doc["cases"] if "error" not in c]
    ceil = doc.get("ceilings", {})
    title_dev = doc["meta"].get("device", "CPU dry run")

    # decode: TB/s vs B x L at the headline heads/dim, one panel per layout
    dec = [c for c in cases if c["workload"] == "decode"]
    if dec:
        head = max({(c["H"], c["Hk"], c["D"]) for c in dec}, key=lambda k: (k == (32, 8, 128),
                                                                           sum(1 for c in dec if (c["H"], c["Hk"], c["D"]) == k)))
        sel = [c for c in dec if (c["H"], c["Hk"], c["D"]) == head]
        layouts = []
        for c in sel:
            lay = "contig" if c["page"] == "contig" else f"page {c['page']}"
            if lay not in layouts:
                layouts.append(lay)
        fig, axes = plt.subplots(1, len(layouts), figsize=(4.2 * len(layouts), 4), squeeze=False, sharey=True)
        for ax, lay in zip(axes[0], layouts):
            cs = [c for c in sel if ("contig" if c["page"] == "contig" else f"page {c['page']}") == lay]
            cs.sort(key=lambda c: (c["B"] * c["L"], c["B"]))
            labels = [f"{c['B']}x{c['L']}" for c in cs]
            for name in _systems(cs):
                xs, ys = [], []
                for j, c in enumerate(cs):
                    r = c["results"].get(name, {})
                    if _ok(r):
                        xs.append(j)
                        ys.append(r["tbps"])
                if xs:
                    ax.plot(xs, ys, marker="o", label=name, color=COLORS.get(name))
            if ceil.get("read_tbps"):
                ax.axhline(ceil["read_tbps"], color="gray", ls="--", lw=1, label="read ceiling")
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
            ax.set_title(f"decode, {lay}")
            ax.set_xlabel("B x L (sorted by B*L)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("effective TB/s (K+V+q+out once)")
        _legend_all(fig, list(axes[0]))
        fig.suptitle(f"decode bandwidth, H {head[0]}/{head[1]}, D {head[2]}, bf16 — {title_dev}")
        fig.tight_layout()
        p = os.path.join(out_dir, "decode_bandwidth.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

    pre = [c for c in cases if c["workload"] == "prefill"]
    if pre:
        dims = sorted({c["D"] for c in pre})
        fig, axes = plt.subplots(1, len(dims), figsize=(4.2 * len(dims), 4), squeeze=False, sharey=True)
        for ax, D in zip(axes[0], dims):
            cs = sorted([c for c in pre if c["D"] == D], key=lambda c: c["L"])
            for name in _systems(cs):
                xs, ys = [], []
                for c in cs:
                    r = c["results"].get(name, {})
                    if _ok(r):
                        xs.append(c["L"])
                        ys.append(r["tflops"])
                if xs:
                    ax.plot(xs, ys, marker="o", label=name, color=COLORS.get(name))
            if ceil.get("matmul_tflops"):
                ax.axhline(ceil["matmul_tflops"], color="gray", ls="--", lw=1, label="bf16 matmul ceiling")
            ax.set_xscale("log", base=2)
            ax.set_title(f"prefill causal, D {D}")
            ax.set_xlabel("L (B x L = const)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("TFLOP/s (causal FLOPs)")
        _legend_all(fig, list(axes[0]))
        fig.suptitle(f"prefill — {title_dev}")
        fig.tight_layout()
        p = os.path.join(out_dir, "prefill_tflops.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

    steps = [c for c in cases if c["workload"] in ("inflight", "spec", "shared")]
    if steps:
        names = _systems(steps)
        fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(steps)), 4))
        w = 0.8 / max(1, len(names))
        for k, name in enumerate(names):
            xs, ys = [], []
            for j, c in enumerate(steps):
                r = c["results"].get(name, {})
                if _ok(r):
                    xs.append(j + k * w)
                    ys.append(r["time_us"])
            if xs:
                ax.bar(xs, ys, width=w, label=name, color=COLORS.get(name))
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(steps))])
        ax.set_xticklabels([c["name"] for c in steps], rotation=15, ha="right", fontsize=7)
        ax.set_ylabel("time per step (µs, lower is better)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        ax.set_title(f"mixed, speculative and shared-prefix steps — {title_dev}")
        fig.tight_layout()
        p = os.path.join(out_dir, "steps.png")
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)
    return written


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    with open(a.json) as f:
        doc = json.load(f)
    out = a.out or os.path.dirname(os.path.abspath(a.json))
    os.makedirs(out, exist_ok=True)
    for p in make_plots(doc, out):
        print("wrote", p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
