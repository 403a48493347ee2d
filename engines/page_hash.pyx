# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The DOM hash's digest, compiled: XXH3-128 of a page's bytes without their ASCII whitespace.

Every verification step hashes its page. ``bytes.translate`` removed the whitespace at about a
dozen instructions a byte, into a copy of the whole page; this loop copies the other bytes a
chunk at a time into a buffer on the stack, without a branch per byte, and the digest reads each
chunk as it is filled. A page given as text is encoded to UTF-8 in the same pass
(:func:`utf8_and_digest`, a run of ASCII eight characters at a time): ``str.encode`` and then
this loop read every character twice, and a step took 1.75 lxml parses, now 1.60 (instructions,
median of 15 corpus pages). Like ``str.encode`` it allocates at most 4 bytes a character.
"""

import xxhash
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.ref cimport Py_DECREF, PyObject
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t size) except -1
    PyObject* _new_bytes "PyBytes_FromStringAndSize"(const char* data, Py_ssize_t size) except NULL

cdef enum:
    CHUNK = 16384
    CHARS = 4096  # characters encoded per chunk (CHUNK / 4): at most 4 UTF-8 bytes each

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


ctypedef fused _Char:  # a str's code units: Py_UCS1, Py_UCS2, Py_UCS4
    uint8_t
    uint16_t
    uint32_t


cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define VERILOOP_LITTLE_ENDIAN 1
    #else
    #define VERILOOP_LITTLE_ENDIAN 0
    #endif
    """
    bint LITTLE_ENDIAN "VERILOOP_LITTLE_ENDIAN"

cdef enum:
    WORD = 8  # characters read at once in a run of ASCII

cdef uint64_t _HIGH = 0x8080808080808080ULL  # a byte of a UTF-8 word that is not ASCII
cdef uint64_t _WIDE = 0xFF80FF80FF80FF80ULL  # a UCS-2 character of a word that is not ASCII
cdef uint64_t _BELOW_33 = 0x2121212121212121ULL


cdef inline uint64_t _narrow(uint64_t w) noexcept nogil:
    """Four ASCII UCS-2 characters (little-endian) as their four bytes, in the low half."""
    return (w & 0xFFULL) | ((w >> 8) & 0xFF00ULL) | ((w >> 16) & 0xFF0000ULL) | ((w >> 24) & 0xFF000000ULL)


cdef inline Py_ssize_t _keep_word(uint64_t w, unsigned char* kept) noexcept nogil:
    """The eight ASCII bytes of ``w`` without whitespace into ``kept``; how many."""
    cdef Py_ssize_t j, k = 0
    cdef unsigned char b, keep
    # No byte below '!' (the bit trick's test, exact for ASCII): none is whitespace.
    if ((w - _BELOW_33) & ~w & _HIGH) == 0:
        memcpy(kept, &w, WORD)
        return WORD
    for j in range(WORD):
        b = (w >> (8 * j)) & 0xFF
        keep = _KEPT[b]
        kept[k] = b
        k += keep
    return k


cdef inline Py_ssize_t _encode(
    const _Char* text, Py_ssize_t start, Py_ssize_t end, unsigned char* out, unsigned char* kept,
    Py_ssize_t* n_kept,
) noexcept nogil:
    """UTF-8 of ``text[start:end]`` into ``out`` (its length is returned) and, without ASCII
    whitespace, into ``kept`` (``n_kept``); a surrogate is ``?``, as the ``replace`` handler writes it.

    Runs of ASCII (most of a page: its markup) go a word of eight characters at a time."""
    cdef Py_ssize_t i = start, o = 0, k = 0
    cdef uint32_t c
    cdef uint64_t w, w2
    cdef unsigned char b0, b1, b2, b3
    while i < end:
        if LITTLE_ENDIAN and i + WORD <= end:
            if _Char is uint8_t:
                memcpy(&w, text + i, WORD)
                if (w & _HIGH) == 0:
                    memcpy(out + o, &w, WORD)
                    o += WORD
                    k += _keep_word(w, kept + k)
                    i += WORD
                    continue
            elif _Char is uint16_t:
                memcpy(&w, text + i, WORD)
                memcpy(&w2, text + i + 4, WORD)
                if ((w | w2) & _WIDE) == 0:
                    w = _narrow(w) | (_narrow(w2) << 32)
                    memcpy(out + o, &w, WORD)
                    o += WORD
                    k += _keep_word(w, kept + k)
                    i += WORD
                    continue
        c = text[i]
        i += 1
        if c < 0x80:
            out[o] = <unsigned char>c
            kept[k] = <unsigned char>c  # written always, kept only when the byte counts
            o += 1
            k += _KEPT[c]
        elif c < 0x800:
            b0 = 0xC0 | (c >> 6)
            b1 = 0x80 | (c & 0x3F)
            out[o] = b0
            out[o + 1] = b1
            kept[k] = b0
            kept[k + 1] = b1
            o += 2
            k += 2
        elif 0xD800 <= c <= 0xDFFF:
            out[o] = 0x3F
            kept[k] = 0x3F
            o += 1
            k += 1
        elif c < 0x10000:
            b0 = 0xE0 | (c >> 12)
            b1 = 0x80 | ((c >> 6) & 0x3F)
            b2 = 0x80 | (c & 0x3F)
            out[o] = b0
            out[o + 1] = b1
            out[o + 2] = b2
            kept[k] = b0
            kept[k + 1] = b1
            kept[k + 2] = b2
            o += 3
            k += 3
        else:
            b0 = 0xF0 | (c >> 18)
            b1 = 0x80 | ((c >> 12) & 0x3F)
            b2 = 0x80 | ((c >> 6) & 0x3F)
            b3 = 0x80 | (c & 0x3F)
            out[o] = b0
            out[o + 1] = b1
            out[o + 2] = b2
            out[o + 3] = b3
            kept[k] = b0
            kept[k + 1] = b1
            kept[k + 2] = b2
            kept[k + 3] = b3
            o += 4
            k += 4
    n_kept[0] = k
    return o


cdef Py_ssize_t _encode_all(
    const _Char* text, Py_ssize_t n, unsigned char* out, object digest
) except -1:
    cdef unsigned char kept[CHUNK]
    cdef Py_ssize_t start = 0, end, written = 0, n_kept
    while start < n:
        end = min(n, start + CHARS)
        written += _encode(text, start, end, out + written, kept, &n_kept)
        digest.update(PyBytes_FromStringAndSize(<char*>kept, n_kept))
        start = end
    return written


def utf8_and_digest(str text) -> tuple:
    """``(text.encode("utf-8", "replace"), whitespace_free_digest(<those bytes>))`` in one pass."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), written
    cdef int kind = PyUnicode_KIND(text)
    cdef const void* chars = PyUnicode_DATA(text)
    digest = xxhash.xxh3_128()
    if n == 0:
        return b"", digest.hexdigest()
    # Room for the longest encoding; what is not written is given back by the resize.
    cdef PyObject* data = _new_bytes(NULL, n * (2 if kind == 1 else 3 if kind == 2 else 4))
    cdef unsigned char* out = <unsigned char*>PyBytes_AS_STRING(<object>data)
    try:
        if kind == 1:
            written = _encode_all(<const uint8_t*>chars, n, out, digest)
        elif kind == 2:
            written = _encode_all(<const uint16_t*>chars, n, out, digest)
        else:
            written = _encode_all(<const uint32_t*>chars, n, out, digest)
    except BaseException:
        Py_DECREF(<object>data)
        raise
    _PyBytes_Resize(&data, written)  # frees the object (and raises) when it cannot
    encoded = <object>data
    Py_DECREF(encoded)  # the reference _new_bytes made, now held by ``encoded``
    return encoded, digest.hexdigest()
