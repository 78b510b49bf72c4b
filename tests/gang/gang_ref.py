"""Serial references of the gang jobs, in the orders their docs state.

ftallreduce (worker/gang/ftar_plan.h): with P vectors and pp the largest
power of two <= P, leaf b = v_b + v_{b+pp} when b + pp < P, else v_b; then
node(L+1, b) = node(L, 2b) + node(L, 2b+1) up to the single root, lower
operand on the left.  Python floats are IEEE doubles, so the bits match.

Generated data (worker/gang/gang_data.h): splitmix64 over a counter.

    python3 gang_ref.py ftallreduce RANKS LENGTH (--seed S | --input F) OUT
    python3 gang_ref.py bytes SEED LENGTH OUT
"""
import math
import struct
import sys

MASK = (1 << 64) - 1


def z(seed, i):
    x = (seed + (i + 1) * 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def gen_double(seed, i):
    x = z(seed, i)
    return math.ldexp((x >> 11) * 2.0 ** -53 - 0.5, (x & 31) - 10)


def gen_rows(seed, ranks, length):
    return [[gen_double(seed, r * length + j) for j in range(length)]
            for r in range(ranks)]


def gen_bytes(seed, length):
    out = bytearray(length)
    for k in range(length):
        out[k] = (z(seed, k // 8) >> (8 * (k % 8))) & 0xFF
    return bytes(out)


def read_rows(path, ranks, length):
    data = open(path, "rb").read()
    assert len(data) == ranks * length * 8
    vals = struct.unpack(f"<{ranks * length}d", data)
    return [list(vals[r * length:(r + 1) * length]) for r in range(ranks)]


def tree_sum(rows):
    """The stated order: fold the ranks beyond pp, then pairwise levels."""
    p = len(rows)
    pp = 1
    while pp * 2 <= p:
        pp *= 2
    level = []
    for b in range(pp):
        if b + pp < p:
            level.append([x + y for x, y in zip(rows[b], rows[b + pp])])
        else:
            level.append(list(rows[b]))
    while len(level) > 1:
        level = [[x + y for x, y in zip(level[2 * i], level[2 * i + 1])]
                 for i in range(len(level) // 2)]
    return level[0]


def pack(vals):
    return struct.pack(f"<{len(vals)}d", *vals)


def main(argv):
    if argv[1] == "ftallreduce":
        ranks, length = int(argv[2]), int(argv[3])
        if argv[4] == "--seed":
            rows = gen_rows(int(argv[5]), ranks, length)
        else:
            rows = read_rows(argv[5], ranks, length)
        open(argv[6], "wb").write(pack(tree_sum(rows)))
    elif argv[1] == "bytes":
        open(argv[4], "wb").write(gen_bytes(int(argv[2]), int(argv[3])))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
