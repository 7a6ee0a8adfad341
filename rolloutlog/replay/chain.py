"""The digest chain of a whole log, stored compactly, and the bisection that compares two.

`core.digest` defines one link: digest[n] covers digest[n-1], event n and the state after
it. Two logs therefore agree up to seq n iff their digests at n agree, which makes "where
do they first differ" a binary search over the two chains instead of a comparison of
states. A chain keeps the raw 16-byte digests end to end in one `bytearray`: a million
events cost 16 MB, not a million `bytes` objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from rolloutlog.core.digest import DIGEST_SIZE


class DigestChain(Sequence[bytes]):
    """The digest after every event of a log, in seq order."""

    def __init__(self, digests: bytes = b"") -> None:
        if len(digests) % DIGEST_SIZE:
            raise ValueError(f"a digest chain holds whole {DIGEST_SIZE}-byte digests")
        self._data = bytearray(digests)

    def append(self, digest: bytes) -> None:
        """Add the digest of the next event."""
        if len(digest) != DIGEST_SIZE:
            raise ValueError(f"expected a {DIGEST_SIZE}-byte digest, got {len(digest)} bytes")
        self._data += digest

    def __len__(self) -> int:
        return len(self._data) // DIGEST_SIZE

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> DigestChain: ...

    def __getitem__(self, index: int | slice) -> bytes | DigestChain:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a digest chain slices contiguously")
            return DigestChain(bytes(self._data[start * DIGEST_SIZE : stop * DIGEST_SIZE]))
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"digest {index} of a chain of {size}")
        index %= size
        return bytes(self._data[index * DIGEST_SIZE : (index + 1) * DIGEST_SIZE])

    def __iter__(self) -> Iterator[bytes]:
        data = bytes(self._data)
        return (data[i : i + DIGEST_SIZE] for i in range(0, len(data), DIGEST_SIZE))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DigestChain):
            return self._data == other._data
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def last(self) -> bytes | None:
        """The digest after the last event, or None for an empty chain."""
        return self[-1] if len(self) else None

    def to_bytes(self) -> bytes:
        """The chain as raw bytes (16 per event), for storage beside a log."""
        return bytes(self._data)


def first_difference(a: Sequence[bytes], b: Sequence[bytes]) -> int | None:
    """The first index where two digest chains differ, or None when they are identical.

    Bisection over the common prefix: O(log n) digest comparisons, because a chain that
    agrees at n agrees everywhere before n. When one chain is a prefix of the other, the
    answer is the length of the shorter one (the first event only one of them has).
    """
    common = min(len(a), len(b))
    if common and a[common - 1] == b[common - 1]:
        return None if len(a) == len(b) else common
    low, high = 0, common  # a and b agree before `low`; they differ at `high` (or end there)
    while low < high:
        middle = (low + high) // 2
        if a[middle] == b[middle]:
            low = middle + 1
        else:
            high = middle
    if low == common and len(a) == len(b):
        return None
    return low
