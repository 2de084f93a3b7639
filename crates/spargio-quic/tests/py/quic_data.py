"""Deterministic payloads and their checksum, identical to the Rust
helpers in tests/common/data.rs.

pattern(n, seed): splitmix64 seeded with `seed`, each 64-bit output
written little-endian, truncated to n bytes.
checksum(data): FNV-1a 64; on the wire as 8 little-endian bytes.
"""

import struct

MASK = (1 << 64) - 1
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3

_pack = struct.Struct("<Q").pack


def pattern(n, seed):
    parts = []
    state = seed & MASK
    for _ in range((n + 7) // 8):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        parts.append(_pack(z))
    return b"".join(parts)[:n]


class Fnv:
    """Incremental FNV-1a 64."""

    def __init__(self):
        self.value = FNV_OFFSET
        self.length = 0

    def update(self, data):
        h = self.value
        for b in data:
            h = ((h ^ b) * FNV_PRIME) & MASK
        self.value = h
        self.length += len(data)


def checksum(data):
    f = Fnv()
    f.update(data)
    return f.value
