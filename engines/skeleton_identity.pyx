# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""A skeleton's identity text, compiled: what :func:`veriloop.engines.skeleton.page_identity`
writes, byte for byte, without building its copy of the skeleton.

Every verification step fingerprints the page its action acted on, and in Python that copy (page
text with its digits masked) and its ``json.dumps(sort_keys=True)`` cost a quarter of a parse of
the page.
Here the skeleton is written straight into one buffer, digits of page text left out as they are
met. Only the shapes the skeleton module produces are written here (dicts with text keys, lists,
text, booleans, None, integers); anything else raises :class:`Unusual` and the caller writes it
in Python.
"""

cimport cython
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)


class Unusual(ValueError):
    """A value :func:`identity` does not write (the Python reference does)."""


cdef const char* _HEX = b"0123456789abcdef"


cdef inline char _short_escape(unsigned int c):
    """The letter of json's two-character escape of ``c`` (0: it has none)."""
    if c == 0x0A:
        return b'n'
    if c == 0x0D:
        return b'r'
    if c == 0x09:
        return b't'
    if c == 0x08:
        return b'b'
    if c == 0x0C:
        return b'f'
    return 0


cdef inline char* _escaped(char* o, unsigned int c):
    """``\\uXXXX`` (lower-case hex), as json's ``ensure_ascii`` writes a character."""
    o[0] = b'\\'
    o[1] = b'u'
    o[2] = _HEX[(c >> 12) & 0xF]
    o[3] = _HEX[(c >> 8) & 0xF]
    o[4] = _HEX[(c >> 4) & 0xF]
    o[5] = _HEX[c & 0xF]
    return o + 6


cdef inline char* _character(char* o, unsigned int code, bint mask):
    """One character of a JSON string as ``json.dumps`` writes it, at ``o``; the end."""
    if 0x20 <= code <= 0x7E:
        if mask and 0x30 <= code <= 0x39:
            return o
        if code == 0x22 or code == 0x5C:
            o[0] = b'\\'
            o += 1
        o[0] = <char>code
        return o + 1
    if _short_escape(code):
        o[0] = b'\\'
        o[1] = _short_escape(code)
        return o + 2
    if code >= 0x10000:
        code -= 0x10000
        o = _escaped(o, 0xD800 | ((code >> 10) & 0x3FF))
        return _escaped(o, 0xDC00 | (code & 0x3FF))
    return _escaped(o, code)


@cython.final
cdef class _Out:
    cdef char* data
    cdef Py_ssize_t size, capacity

    def __cinit__(self):
        self.capacity = 4096
        self.size = 0
        self.data = <char*>malloc(self.capacity)
        if self.data is NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)

    cdef int reserve(self, Py_ssize_t more) except -1:
        cdef Py_ssize_t need = self.size + more
        cdef char* grown
        if need <= self.capacity:
            return 0
        while self.capacity < need:
            self.capacity *= 2
        grown = <char*>realloc(self.data, self.capacity)
        if grown is NULL:
            raise MemoryError()
        self.data = grown
        return 0

    cdef inline int byte(self, char c) except -1:
        if self.size >= self.capacity:
            self.reserve(1)
        self.data[self.size] = c
        self.size += 1
        return 0

    cdef int ascii(self, const char* text, Py_ssize_t n) except -1:
        self.reserve(n)
        memcpy(self.data + self.size, text, n)
        self.size += n
        return 0

    cdef int text(self, str value, bint mask) except -1:
        """``value`` as a JSON string, as ``json.dumps`` writes it (``ensure_ascii``); ``mask``:
        without its ASCII digits."""
        cdef Py_UCS4 c
        cdef Py_ssize_t i, n = len(value)
        cdef const unsigned char* ascii
        self.reserve(12 * n + 2)  # at most a surrogate pair per character
        cdef char* o = self.data + self.size
        o[0] = b'"'
        o += 1
        if PyUnicode_IS_ASCII(value):  # the usual text: read as bytes, not character by character
            ascii = <const unsigned char*>PyUnicode_DATA(value)
            for i in range(n):
                o = _character(o, ascii[i], mask)
        else:
            for c in value:
                o = _character(o, c, mask)
        o[0] = b'"'
        self.size = o + 1 - self.data
        return 0

    cdef int value(self, object value) except -1:
        """Any value the skeleton holds, as ``json.dumps(sort_keys=True)`` writes it."""
        cdef type kind = type(value)
        if kind is str:
            self.text(<str>value, False)
        elif value is None:
            self.ascii(b"null", 4)
        elif value is True:
            self.ascii(b"true", 4)
        elif value is False:
            self.ascii(b"false", 5)
        elif kind is dict:
            self.mapping(<dict>value)
        elif kind is list:
            self.items(<list>value)
        elif kind is int:
            written = str(value).encode("ascii")
            self.ascii(written, len(written))
        else:
            raise Unusual(kind.__name__)
        return 0

    cdef int mapping(self, dict value, str marked_field=None, without_marked=None) except -1:
        """A dict, keys sorted; with ``marked_field``, a dict value that has that field stands as
        ``without_marked(key, value)`` gives it."""
        keys = list(value)
        for key in keys:
            if type(key) is not str:
                raise Unusual("a key that is not text")
        keys.sort()
        self.byte(b'{')
        cdef Py_ssize_t n
        for n in range(len(keys)):
            key = keys[n]
            if n:
                self.byte(b',')
            self.text(<str>key, False)
            self.byte(b':')
            item = value[key]
            if marked_field is not None and type(item) is dict and marked_field in <dict>item:
                item = without_marked(key, item)
            self.value(item)
        self.byte(b'}')
        return 0

    cdef int items(self, list value) except -1:
        self.byte(b'[')
        cdef Py_ssize_t n
        for n in range(len(value)):
            item = value[n]
            if n:
                self.byte(b',')
            self.value(item)
        self.byte(b']')
        return 0


def identity(dict skeleton, str marked_field, without_marked):
    """``page_identity(skeleton)`` as UTF-8 bytes (it is ASCII). ``marked_field``: the descriptor
    field of background kinds; ``without_marked(key, desc)`` gives what stands for a descriptor
    that has it. Raises :class:`Unusual` for a shape only the Python reference writes."""
    cdef _Out out = _Out()
    alerts = skeleton.get("alerts")
    content = skeleton.get("content")
    elements = skeleton.get("elements")
    out.ascii(b'{"alerts":', 10)
    out.value(alerts)
    out.ascii(b',"content":', 11)
    if type(content) is dict:
        out.ascii(b'{"headings":', 12)
        _masked_texts(out, (<dict>content).get("headings", []))
        out.ascii(b',"texts":', 9)
        _masked_texts(out, (<dict>content).get("texts", []))
        out.byte(b'}')
    elif isinstance(content, dict):
        raise Unusual("a dict subclass")
    else:
        out.value(content)
    out.ascii(b',"elements":', 12)
    if type(elements) is dict:
        out.mapping(<dict>elements, marked_field, without_marked)
    elif isinstance(elements, dict):
        raise Unusual("a dict subclass")
    else:
        out.value(elements)
    out.byte(b'}')
    return PyBytes_FromStringAndSize(out.data, out.size)


cdef int _masked_texts(_Out out, object texts) except -1:
    """The texts of a content field, digits masked (what is not text is left out)."""
    if type(texts) is not list:
        raise Unusual("content that is not a list")
    out.byte(b'[')
    first = True
    for text in <list>texts:
        if type(text) is str:
            if not first:
                out.byte(b',')
            first = False
            out.text(<str>text, True)
        elif isinstance(text, str):
            raise Unusual("a str subclass")
    out.byte(b']')
    return 0
