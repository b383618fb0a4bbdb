"""v35's list-schedule model (tenth session, attn_notes.md): 264 blocks (2 per SM) take items from one greedy list;
each block streams at a fixed per-SM rate (us per KV tile; 120 SMs spread over 2.15 - 2.25, 12 at 2.41, as the
timeline's per-SM rates), 1 us per item boundary, a combine cost per split pair. Prints the last block end and the
median end for the shipped list (512 items of 64 tiles, 64x4096) and for lists whose last k pairs are cut in 2 or 4.
Its premise (fixed rates under a changing load) did not hold on the H200: see the notes."""
import heapq


def run(items, rates, start=12.5, ovh=1.0):
    h = [(start, i) for i in range(len(rates))]
    heapq.heapify(h)
    ends = [start] * len(rates)
    for tiles, extra in items:
        now, i = heapq.heappop(h)
        e = now + ovh + extra + tiles * rates[i]
        ends[i] = e
        heapq.heappush(h, (e, i))
    s = sorted(ends)
    return round(s[-1], 1), round(s[len(s) // 2], 1)


sm = [2.15 + 0.10 * k / 119 for k in range(120)] + [2.41] * 12
rates = [r for r in sm for _ in range(2)]
print("shipped", run([(64, 0)] * 512, rates))
for k in [8, 16, 24, 32, 48, 64]:
    for comb in [2.0, 4.0]:
        two = [(64, 0)] * (512 - k) + [(32, comb / 2)] * (2 * k)
        four = [(64, 0)] * (512 - k) + [(16, comb / 4)] * (4 * k)
        print(k, comb, "2x32", run(two, rates), "4x16", run(four, rates))
