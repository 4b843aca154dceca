# The sum64 content hash of samebits traces, computed on a tensor's device with no host
# synchronization: the tensor's bytes as 64-bit words w_i, sum of (w_i XOR m_i) * m_i modulo 2^64
# with odd position multipliers m_i (include/samebits/trace.hpp defines it; the C++ recorder's
# samebits::trace::sum_hash computes the same value from host bytes). Used by samebits.torch.trace.
# Imports only torch and the standard library.
from __future__ import annotations

import threading
from typing import Any

import torch

__all__ = ["sum_hash", "sum_hash_reference", "hash_hex", "SUM_HASH_ROW"]

SUM_HASH_ROW = 4096  # multiplier of word i: A[i % ROW] * B[i // ROW] (mod 2^64)
_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _col_multiplier(k: int) -> int:
    return _splitmix64(2 * k) | 1


def _row_multiplier(j: int) -> int:
    return _splitmix64(2 * j + 1) | 1


def _signed(u: int) -> int:
    return u - (1 << 64) if u >> 63 else u


def sum_hash_reference(data: bytes) -> int:
    """The sum64 hash of a tensor's bytes (row-major, little-endian) in pure Python: the
    definition that the device code and the C++ side must match."""
    data = bytes(data) + b"\0" * (-len(data) % 8)
    h = 0
    for i in range(len(data) // 8):
        w = int.from_bytes(data[8 * i : 8 * i + 8], "little")
        m = (_col_multiplier(i % SUM_HASH_ROW) * _row_multiplier(i // SUM_HASH_ROW)) & _MASK
        h = (h + (w ^ m) * m) & _MASK
    return h


def _has_int_dot(device: torch.device) -> bool:
    return device.type == "cpu"


def _reuse_scratch(device: torch.device) -> bool:
    # Elsewhere a reused buffer could be written by a hash on one stream while another stream's
    # hash still reads it.
    return device.type == "cpu"


class _Multipliers:
    """Per device, the multiplier vector m[i] = A[i % ROW] * B[i // ROW] (as int64, wrapped) up
    to the longest tensor seen, grown by doubling; tensors longer than _FULL_LIMIT words are hashed
    chunk by chunk with multipliers made on the fly, to bound the memory. On the CPU the hash's
    temporary lives in a reused scratch buffer: a fresh large allocation there costs more than
    the hash itself (the pages are faulted in anew each time)."""

    _FULL_LIMIT = 1 << 23

    def __init__(self) -> None:
        self._full: dict[torch.device, torch.Tensor] = {}
        self._cols: dict[torch.device, torch.Tensor] = {}
        self._rows: dict[torch.device, torch.Tensor] = {}
        self._scratch: dict[Any, torch.Tensor] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _vector(values: list[int], device: torch.device) -> torch.Tensor:
        return torch.tensor([_signed(v) for v in values], dtype=torch.int64, device=device)

    def cols(self, device: torch.device) -> torch.Tensor:
        c = self._cols.get(device)
        if c is None:
            c = self._vector([_col_multiplier(k) for k in range(SUM_HASH_ROW)], device)
            self._cols[device] = c
        return c

    def rows(self, n_rows: int, device: torch.device) -> torch.Tensor:
        r = self._rows.get(device)
        if r is None or r.numel() < n_rows:
            size = max(n_rows, 2 * (0 if r is None else r.numel()), 64)
            r = self._vector([_row_multiplier(j) for j in range(size)], device)
            self._rows[device] = r
        return r[:n_rows]

    def full(self, n: int, device: torch.device) -> torch.Tensor:
        f = self._full.get(device)
        if f is None or f.numel() < n:
            size = max(n, 2 * (0 if f is None else f.numel()), SUM_HASH_ROW)
            size = (size + SUM_HASH_ROW - 1) // SUM_HASH_ROW * SUM_HASH_ROW
            rows = self.rows(size // SUM_HASH_ROW, device)
            # int64 products wrap modulo 2^64 on the CPU and on CUDA, as the definition wants.
            f = (rows.view(-1, 1) * self.cols(device).view(1, -1)).reshape(-1)
            self._full[device] = f
        return f[:n]

    def scratch(self, n_words: int, device: torch.device) -> torch.Tensor:
        """n_words of int64 temporary: reused on the CPU, fresh (from the stream-aware caching
        allocator) elsewhere."""
        if not _reuse_scratch(device):
            return torch.empty(n_words, dtype=torch.int64, device=device)
        b = self._scratch.get(device)
        if b is None or b.numel() < n_words:
            b = torch.empty(max(n_words, 1024), dtype=torch.int64, device=device)
            self._scratch[device] = b
        return b[:n_words]

    def nan_count(self, flat: torch.Tensor) -> torch.Tensor:
        """The number of NaNs in flat (0-d, on its device); the mask in a reused CPU buffer."""
        if flat.device.type != "cpu":
            return torch.count_nonzero(torch.isnan(flat))
        with self._lock:
            b = self._scratch.get("bool")
            if b is None or b.numel() < flat.numel():
                b = torch.empty(max(flat.numel(), 1024), dtype=torch.bool)
                self._scratch["bool"] = b
            return torch.count_nonzero(torch.ne(flat, flat, out=b[: flat.numel()]))

    def hash(self, t: torch.Tensor) -> torch.Tensor:
        """The sum64 hash of t's values as a 0-d int64 tensor on t's device; nothing is read back."""
        flat = t.reshape(-1)
        nbytes = flat.numel() * flat.element_size()
        n = (nbytes + 7) // 8
        if n == 0:
            return torch.zeros((), dtype=torch.int64, device=t.device)
        whole = n <= self._FULL_LIMIT
        with self._lock:  # the CPU scratch buffer is shared
            w = self.scratch(n, t.device)
            m = self.full(n, t.device) if whole else None
            if nbytes % 8 == 0:
                if whole:
                    torch.bitwise_xor(flat.view(torch.int64), m, out=w)
                else:
                    w.copy_(flat.view(torch.int64))
            else:  # the last word is padded with zero bytes
                b = w.view(torch.uint8)
                b[nbytes:].zero_()
                b[:nbytes].copy_(flat.view(torch.uint8))
                if whole:
                    w.bitwise_xor_(m)
            if whole:
                # The CPU's int64 dot product is one pass (and wraps like the sum); CUDA has none.
                return torch.dot(w, m) if _has_int_dot(t.device) else torch.sum(w.mul_(m))
            # Longer: the multipliers chunk by chunk (a chunk is a whole number of rows).
            h = torch.zeros((), dtype=torch.int64, device=t.device)
            cols = self.cols(t.device).view(1, -1)
            rows = self.rows((n + SUM_HASH_ROW - 1) // SUM_HASH_ROW, t.device)
            per_chunk = self._FULL_LIMIT // SUM_HASH_ROW
            for r0 in range(0, rows.numel(), per_chunk):
                part = w[r0 * SUM_HASH_ROW : (r0 + per_chunk) * SUM_HASH_ROW]
                m = (rows[r0 : r0 + per_chunk].view(-1, 1) * cols).reshape(-1)[: part.numel()]
                h = h + torch.sum(part.bitwise_xor_(m).mul_(m))
            return h


_MULTIPLIERS = _Multipliers()


def sum_hash(t: torch.Tensor) -> torch.Tensor:
    """The sum64 hash of t as a 0-d int64 tensor on t's device (no host synchronization)."""
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    return _MULTIPLIERS.hash(t)


def hash_hex(h: int) -> str:
    return f"{h & _MASK:016x}"


