# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The DOM hash's digest, compiled: XXH3-128 of a page's bytes without their ASCII whitespace.

Every verification step hashes its page. ``bytes.translate`` removed the whitespace at about a
dozen instructions a byte, into a copy of the whole page; this loop copies the other bytes a
chunk at a time into a buffer on the stack, without a branch per byte, and the digest reads each
chunk as it is filled.
"""

import xxhash
from cpython.bytes cimport PyBytes_FromStringAndSize

cdef enum:
    CHUNK = 16384

cdef unsigned char _KEPT[256]  # 0 for the ASCII whitespace the hash ignores, 1 for any other byte
for _byte in range(256):
    _KEPT[_byte] = _byte not in b" \t\n\r\f\v"


def whitespace_free_digest(const unsigned char[::1] data) -> str:
    """``xxh3_128_hexdigest(data.translate(None, b" \\t\\n\\r\\f\\v"))``, without the copy."""
    cdef unsigned char buffer[CHUNK]
    cdef Py_ssize_t n = data.shape[0], start = 0, end, i, kept
    cdef unsigned char c
    digest = xxhash.xxh3_128()
    while start < n:
        end = min(n, start + CHUNK)
        kept = 0
        for i in range(start, end):
            c = data[i]
            buffer[kept] = c  # written always, kept only when the byte counts
            kept += _KEPT[c]
        digest.update(PyBytes_FromStringAndSize(<char*>buffer, kept))
        start = end
    return digest.hexdigest()
