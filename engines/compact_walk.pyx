# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compact form of a page for the prompts, compiled: one pass that reads the parsed page and
writes its compact HTML, without changing the tree.

The compact form was the page stripped in place of its noise and hidden elements, its attributes
cut to the kept ones and its text squashed, then written by libxml2's HTML serializer: four passes
that cost half a parse. This pass writes the same bytes from the tree as the parser left it. What
it reproduces of the serializer (libxml2 2.14, ``htmlNodeDumpFormatOutput`` and
``htmlAttrDumpOutput`` in HTMLtree.c as lxml's ``tostring(method="html")`` calls them, without
pretty printing):

- a void element (``_VOID``) is its start tag alone; an ``li`` with no children is its start tag
  alone; every other element is written with its end tag, children or not;
- text escapes ``&``, ``<`` and ``>`` only (script and style, the elements whose text it writes
  raw, are noise here, and squashed text has no control characters);
- a boolean attribute (``_BOOLEAN``) is its name alone, and so is one without a value;
- an attribute value escapes ``&`` (not ``&{...}``, HTML 4's script macro), ``<`` (not a
  ``<!--...-->`` server-side include) and ``>``; a URI attribute (``_URI``, and ``name`` on an
  ``a``) then loses its leading blanks and has its spaces, control and non-ASCII bytes
  %-escaped; the value is quoted with ``"``, or with ``'`` when it has a ``"`` and no ``'``, else
  with ``"`` and each ``"`` as ``&quot;``.

The tree comes from the engine's parser (:func:`veriloop.engines.skeleton.parse_utf8`): no
comments, processing instructions or namespaces, lower-case tag and attribute names.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromString
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, strchr, strcmp, strlen, strstr

cimport lxml.includes.etreepublic as cetree
from lxml.includes cimport tree
from lxml.includes.tree cimport xmlAttr, xmlNode

cetree.import_lxml__etree()


cdef enum:
    MAX_NAMES = 32
    SLOT_BITS = 10
    SLOTS = 1 << SLOT_BITS  # names remembered a page (a direct-mapped table)


cdef enum Kind:
    """What a tag or attribute name means here."""
    KEPT = 1  # attributes
    BOOLEAN = 2
    URI = 4
    NAME = 8
    NUMBER = 16
    HIDDEN = 32
    LEFT_OUT = 64  # tags
    VOID = 128
    LI = 256
    ANCHOR = 512
    LABEL = 1024  # a tag
    FOR = 2048  # an attribute


cdef enum Plain:
    """Bytes written as they are, a run at a time (``_BYTES``)."""
    IN_TEXT = 1  # by squashed text
    IN_SQUASHED = 2  # by squashing alone (an attribute value's)
    IN_VALUE = 4  # by an attribute value
    IN_URI = 8  # by a URI attribute's value
    SPACE = 16  # ASCII whitespace (``str.isspace``)
    NOTED = 32  # a byte an attribute value's reading stops at (``_read_value``)


cdef struct Out:
    unsigned char* data
    size_t size
    size_t cap


cdef struct Names:
    const char* names[MAX_NAMES]
    Py_ssize_t count


cdef struct Slot:
    const unsigned char* name
    int kind


cdef unsigned char _BYTES[256]
for _c in range(1, 256):
    # Not whitespace or a control, nor the lead byte of U+0085/U+00A0, U+1680, U+2000-U+205F,
    # U+3000 or U+FFFE/U+FFFF: squashing leaves it as it is.
    _kept = 0x21 <= _c <= 0x7E or (_c >= 0x80 and _c not in b"\xc2\xe1\xe2\xe3\xef")
    _BYTES[_c] = (
        (IN_SQUASHED if _kept else 0)
        | (IN_TEXT if _kept and _c not in b"&<>" else 0)
        | (IN_VALUE if _c not in b'&<>"' else 0)
        | (IN_URI if 0x21 <= _c <= 0x7E and _c not in b'&<>"' else 0)
        | (SPACE if _c == 0x20 or 0x09 <= _c <= 0x0D or 0x1C <= _c <= 0x1F else 0)
        | (NOTED if _c <= 0x20 or _c in b"\"'\xef" else 0)
    )
_BYTES[0] = NOTED  # the end of the value


cdef int _reserve(Out* out, size_t extra) except -1:
    """Room for ``extra`` more bytes and a NUL (the writers below write without checks)."""
    cdef size_t cap = out.size + extra + 1
    cdef unsigned char* grown
    if cap <= out.cap:
        return 0
    if cap < 2 * out.cap:
        cap = 2 * out.cap
    grown = <unsigned char*>realloc(out.data, cap)
    if grown is NULL:
        raise MemoryError()
    out.data, out.cap = grown, cap
    return 0


cdef inline void _put(Out* out, const void* s, size_t n) noexcept:
    memcpy(out.data + out.size, s, n)
    out.size += n


cdef inline void _byte(Out* out, unsigned char c) noexcept:
    out.data[out.size] = c
    out.size += 1


cdef int _fill(Names* into, tuple names) except -1:
    """``names`` (bytes, kept alive by the caller) as C strings."""
    if len(names) > MAX_NAMES:
        raise ValueError(f"at most {MAX_NAMES} names")
    into.count = len(names)
    for i in range(into.count):
        into.names[i] = <bytes>names[i]
    return 0


cdef bint _in(const Names* names, const unsigned char* name) noexcept:
    cdef Py_ssize_t i
    for i in range(names.count):
        if <unsigned char>names.names[i][0] == name[0] and strcmp(
            names.names[i], <const char*>name
        ) == 0:
            return True
    return False


cdef bint _same(const unsigned char* name, const char* lower) noexcept:
    """``name`` is ``lower`` in any ASCII case (the serializer's ``xmlStrcasecmp``)."""
    while lower[0] != 0:
        if (name[0] | 0x20 if 0x41 <= name[0] <= 0x5A else name[0]) != <unsigned char>lower[0]:
            return False
        name += 1
        lower += 1
    return name[0] == 0


cdef bint _any_same(const unsigned char* name, const Names* names) noexcept:
    cdef Py_ssize_t i
    for i in range(names.count):
        if _same(name, names.names[i]):
            return True
    return False


_VOID = (b"area", b"base", b"basefont", b"br", b"col", b"frame", b"hr", b"img", b"input",
         b"isindex", b"link", b"meta", b"param")
_BOOLEAN = (b"checked", b"compact", b"declare", b"defer", b"disabled", b"ismap", b"multiple",
            b"nohref", b"noresize", b"noshade", b"nowrap", b"readonly", b"selected")
_URI = (b"href", b"action", b"src")
cdef Names _void, _boolean, _uri
_fill(&_void, _VOID)  # the elements libxml2's table marks empty: no end tag, no children written
_fill(&_boolean, _BOOLEAN)  # the attributes the serializer writes minimized (htmlIsBooleanAttr)
_fill(&_uri, _URI)  # the attributes it writes as URIs (and name on an a)


include "utf8_space.pxi"


cdef bint _blank(const unsigned char* c) noexcept:
    """Only whitespace (``str.isspace``), or nothing: text that squashing drops."""
    cdef Py_ssize_t width
    while True:
        while _BYTES[c[0]] & SPACE:
            c += 1
        if c[0] < 0x80:
            return c[0] == 0
        width = _unicode_space(c)
        if width == 0:
            return False
        c += width


cdef void _squash(Out* out, const unsigned char* c, bint* space, bint escape) noexcept:
    """Append the NUL-terminated UTF-8 ``c`` squashed (the caller reserved 5 bytes a byte): the
    characters lxml cannot write (controls but tab, newline and return; U+FFFE, U+FFFF) go, then
    each run of whitespace is one space (``space``: a run is open, from the text before); with
    ``escape``, ``&``, ``<`` and ``>`` are written as text escapes them."""
    cdef unsigned char plain = IN_TEXT if escape else IN_SQUASHED
    cdef const unsigned char* run
    cdef Py_ssize_t width
    while True:
        run = c
        # A lone space between two characters written as they are stays as it is.
        while _BYTES[c[0]] & plain or (c[0] == 0x20 and c != run and _BYTES[c[1]] & plain):
            c += 1
        if c != run:
            _put(out, run, c - run)
            space[0] = False
        if c[0] == 0:
            return
        if c[0] < 0x20 and not (c[0] == 0x09 or c[0] == 0x0A or c[0] == 0x0D):
            c += 1
            continue
        if c[0] == 0xEF and c[1] == 0xBF and (c[2] == 0xBE or c[2] == 0xBF):
            c += 3
            continue
        width = _unicode_space(c)
        if width:
            if not space[0]:
                _byte(out, 0x20)
                space[0] = True
            c += width
            while _BYTES[c[0]] & SPACE:  # the run goes on (removed controls in it change nothing)
                c += 1
            continue
        space[0] = False
        if c[0] == 0x26:
            _put(out, b"&amp;", 5)
        elif c[0] == 0x3C:
            _put(out, b"&lt;", 4)
        elif c[0] == 0x3E:
            _put(out, b"&gt;", 4)
        else:
            _byte(out, c[0])  # the lead byte of a character that is not whitespace
        c += 1


cdef struct Value:
    size_t size
    bint double  # it has a " (and is quoted otherwise)
    bint single  # it has a '
    bint squashed  # it is squashed first


cdef void _read_value(const unsigned char* v, Value* value) noexcept:
    """Read an attribute value once. It is squashed when it has a control character (a newline
    or tab could start a fake prompt line), a run of two spaces, U+FFFE or U+FFFF."""
    cdef const unsigned char* c = v
    value.double = value.single = value.squashed = False
    while True:
        while not _BYTES[c[0]] & NOTED:
            c += 1
        if c[0] == 0:
            break
        if c[0] == 0x22:
            value.double = True
        elif c[0] == 0x27:
            value.single = True
        elif c[0] < 0x20 or (c[0] == 0x20 and c[1] == 0x20):
            value.squashed = True
        elif c[0] == 0xEF and c[1] == 0xBF and (c[2] == 0xBE or c[2] == 0xBF):
            value.squashed = True
        c += 1
    value.size = c - v


cdef inline void _value_byte(Out* out, unsigned char c, bint uri, bint quot) noexcept:
    """One byte of an escaped attribute value, as the URI escape and the quoting write it."""
    if uri and (c <= 0x20 or c >= 0x7F):
        _byte(out, 0x25)
        _byte(out, b"0123456789ABCDEF"[c >> 4])
        _byte(out, b"0123456789ABCDEF"[c & 0xF])
    elif quot and c == 0x22:
        _put(out, b"&quot;", 6)
    else:
        _byte(out, c)


cdef int _write_value(Out* out, const unsigned char* v, const Value* value, bint uri) except -1:
    """``="value"`` as ``htmlAttrDumpOutput`` writes it (see the module's docstring)."""
    cdef size_t n = value.size, i = 0, run, end
    cdef bint quot = value.double and value.single
    cdef unsigned char quote = 0x27 if value.double and not quot else 0x22
    cdef unsigned char plain = IN_URI if uri else IN_VALUE
    cdef const char* found
    _reserve(out, 6 * n + 3)
    _byte(out, 0x3D)
    _byte(out, quote)
    if uri:
        while v[i] == 0x20 or v[i] == 0x09 or v[i] == 0x0A or v[i] == 0x0D:
            i += 1
    while True:
        run = i
        while _BYTES[v[i]] & plain:
            i += 1
        _put(out, v + run, i - run)
        if i >= n:
            break
        end = i + 1
        if v[i] == 0x3C:
            found = NULL
            if v[i + 1] == 0x21 and v[i + 2] == 0x2D and v[i + 3] == 0x2D:
                found = strstr(<const char*>v + i, b"-->")
            if found is NULL:
                _put(out, b"&lt;", 4)
                i = end
                continue
            end = <const unsigned char*>found - v + 3
        elif v[i] == 0x3E:
            _put(out, b"&gt;", 4)
            i = end
            continue
        elif v[i] == 0x26:
            found = strchr(<const char*>v + i, 0x7D) if v[i + 1] == 0x7B else NULL
            if found is NULL:
                _put(out, b"&amp;", 5)
                i = end
                continue
            end = <const unsigned char*>found - v + 1
        while i < end:  # a byte, or a construct the value escape keeps as it is
            _value_byte(out, v[i], uri, quot)
            i += 1
    _byte(out, quote)
    return 0


cdef inline Py_ssize_t _slot(const unsigned char* name) noexcept:
    # libxml2 keeps one copy of each name in the document's dictionary, and the tree is only read:
    # within one page's pass, a name's address identifies it.
    cdef size_t mixed = <size_t>name * <size_t>0x9E3779B97F4A7C15
    return <Py_ssize_t>(mixed >> (8 * sizeof(size_t) - SLOT_BITS))


@cython.final  # direct calls, not through a table
cdef class _Writer:
    """One page's compact HTML and element numbers."""

    cdef Out out, value, squashed
    cdef Names kept, left_out
    cdef const char* number_attr
    cdef const char* hidden_attr
    cdef Slot names[SLOTS]
    cdef set numbers
    cdef dict numbered  # element number -> the first element with it (its address)
    cdef list labels  # the label elements with a ``for`` (their addresses)

    def __dealloc__(self):
        free(self.out.data)
        free(self.value.data)
        free(self.squashed.data)

    cdef inline int kind(self, const unsigned char* name) noexcept:
        """What the tag or attribute ``name`` means here (one table: their flags differ)."""
        cdef Slot* slot = &self.names[_slot(name)]
        if slot.name is not name:
            slot.name = name
            slot.kind = (
                (KEPT if _in(&self.kept, name) else 0)
                | (BOOLEAN if _any_same(name, &_boolean) else 0)
                | (URI if _any_same(name, &_uri) else 0)
                | (NAME if _same(name, b"name") else 0)
                | (NUMBER if strcmp(<const char*>name, self.number_attr) == 0 else 0)
                | (HIDDEN if strcmp(<const char*>name, self.hidden_attr) == 0 else 0)
                | (LEFT_OUT if _in(&self.left_out, name) else 0)
                | (VOID if _any_same(name, &_void) else 0)
                | (LI if _same(name, b"li") else 0)
                | (ANCHOR if _same(name, b"a") else 0)
                | (LABEL if _same(name, b"label") else 0)
                | (FOR if _same(name, b"for") else 0)
            )
        return slot.kind

    cdef const unsigned char* value_of(self, xmlAttr* attr) except NULL:
        """The attribute's value (NUL-terminated; valid until the next call)."""
        cdef xmlNode* node = attr.children
        cdef size_t n
        if node is not NULL and node.next is NULL and node.content is not NULL:
            return node.content
        self.value.size = 0
        while node is not NULL:
            if node.content is not NULL:
                n = strlen(<const char*>node.content)
                _reserve(&self.value, n)
                _put(&self.value, node.content, n)
            node = node.next
        _reserve(&self.value, 0)
        self.value.data[self.value.size] = 0
        return self.value.data

    cdef int add_number(self, xmlAttr* attr) except -1:
        """The element number ``int`` reads in the value, if any (``isdecimal``: ``int`` reads
        every decimal digit, not every digit, such as "²"); the first element with it is the one
        its name is read from."""
        cdef const unsigned char* c = self.value_of(attr)
        cdef long long number = 0
        cdef Py_ssize_t digits = 0
        while 0x30 <= c[digits] <= 0x39 and digits < 18:
            number = 10 * number + (c[digits] - 0x30)
            digits += 1
        if digits and c[digits] == 0:
            read = number
        else:
            # Spaces around it, or another script's decimal digits. No element number has more
            # than 18 digits: a page's longer one (int refuses more than 4,300) names nothing an
            # action can.
            text = (<const char*>c).decode("utf-8").strip()
            if not (text.isdecimal() and len(text) <= 18):
                return 0
            read = int(text)
        self.numbers.add(read)
        self.numbered.setdefault(read, <size_t>attr.parent)
        return 0

    cdef int attributes_of(self, xmlNode* node, int tag) except -1:
        """Read an element's number and, on a label, its ``for`` (elements not written)."""
        cdef xmlAttr* attr = node.properties
        cdef int kind
        while attr is not NULL:
            if attr.ns is NULL:
                kind = self.kind(attr.name)
                if kind & NUMBER:
                    self.add_number(attr)
                elif kind & FOR and tag & LABEL:
                    self.labels.append(<size_t>node)
            attr = attr.next
        return 0

    cdef bint hidden(self, xmlNode* node) except -1:
        cdef xmlAttr* attr = node.properties
        while attr is not NULL:
            if attr.ns is NULL and self.kind(attr.name) & HIDDEN:
                return strcmp(<const char*>self.value_of(attr), b"1") == 0
            attr = attr.next
        return False

    cdef bint gone(self, xmlNode* node) except -1:
        """The element is left out with its subtree (its tail stays)."""
        return self.kind(node.name) & LEFT_OUT or self.hidden(node)

    cdef int numbers_below(self, xmlNode* top, xmlNode* skip) except -1:
        """The numbers (and labels) in ``top`` and its descendants, but in ``skip`` and its
        descendants."""
        cdef xmlNode* node = top
        while True:
            if node.type == tree.XML_ELEMENT_NODE and node is not skip:
                self.attributes_of(node, self.kind(node.name))
                if node.children is not NULL:
                    node = node.children
                    continue
            while node is not top and node.next is NULL:
                node = node.parent
            if node is top:
                return 0
            node = node.next

    cdef int children_numbers(self, xmlNode* node) except -1:
        node = node.children
        while node is not NULL:
            self.numbers_below(node, NULL)
            node = node.next
        return 0

    cdef int attribute(self, xmlAttr* attr, int kind, bint anchor) except -1:
        cdef size_t n = strlen(<const char*>attr.name)
        cdef const unsigned char* text
        cdef Value value
        cdef bint space = False
        _reserve(&self.out, n + 1)
        _byte(&self.out, 0x20)
        _put(&self.out, attr.name, n)
        if attr.children is NULL or kind & BOOLEAN:
            return 0
        text = self.value_of(attr)
        _read_value(text, &value)
        if value.squashed or attr.children.next is not NULL or (
            attr.children.type != tree.XML_TEXT_NODE
        ):
            # What lxml made of ``squash(value) or ""``: a blank value is empty.
            self.squashed.size = 0
            _reserve(&self.squashed, value.size)
            if not _blank(text):
                _squash(&self.squashed, text, &space, False)
            self.squashed.data[self.squashed.size] = 0
            text = self.squashed.data
            _read_value(text, &value)
        return _write_value(&self.out, text, &value, kind & URI or (kind & NAME and anchor))

    cdef bint start(self, xmlNode* node, const unsigned char* name) except -1:
        """Write the start tag; False: the element's children and end tag are not written."""
        cdef size_t n = strlen(<const char*>name)
        cdef int tag = self.kind(name), kind
        cdef xmlAttr* attr = node.properties
        _reserve(&self.out, n + 1)
        _byte(&self.out, 0x3C)
        _put(&self.out, name, n)
        while attr is not NULL:
            if attr.ns is NULL:
                kind = self.kind(attr.name)
                if kind & NUMBER:
                    self.add_number(attr)
                elif kind & FOR and tag & LABEL:
                    self.labels.append(<size_t>node)
                if kind & KEPT:
                    self.attribute(attr, kind, tag & ANCHOR)
            attr = attr.next
        _reserve(&self.out, 1)
        _byte(&self.out, 0x3E)
        return not tag & VOID

    cdef bint has_children(self, xmlNode* node) except -1:
        """The element keeps a child: an element not left out, or text that is not blank."""
        node = node.children
        while node is not NULL:
            if node.type == tree.XML_ELEMENT_NODE:
                if not self.gone(node):
                    return True
            elif node.content is not NULL and not _blank(node.content):
                return True
            node = node.next
        return False

    cdef int end(self, xmlNode* node, const unsigned char* name) except -1:
        cdef size_t n = strlen(<const char*>name)
        if self.kind(name) & LI and not self.has_children(node):
            return 0
        _reserve(&self.out, n + 3)
        _put(&self.out, b"</", 2)
        _put(&self.out, name, n)
        _byte(&self.out, 0x3E)
        return 0

    cdef xmlNode* text(self, xmlNode* node, bint strip) except? NULL:
        """Write the text that starts at ``node`` squashed: its text nodes and, with ``strip``,
        those after the elements left out among them (their tails). The node after it."""
        cdef xmlNode* end = node
        cdef bint blank = True, space = False
        while end is not NULL:
            if end.type == tree.XML_TEXT_NODE or end.type == tree.XML_CDATA_SECTION_NODE:
                if blank and end.content is not NULL:
                    blank = _blank(end.content)
            elif end.type == tree.XML_ELEMENT_NODE and strip and self.gone(end):
                self.numbers_below(end, NULL)
            else:
                break
            end = end.next
        if not blank:
            while node is not end:
                if node.type != tree.XML_ELEMENT_NODE and node.content is not NULL:
                    _reserve(&self.out, 5 * strlen(<const char*>node.content))
                    _squash(&self.out, node.content, &space, True)
                node = node.next
        return end

    cdef int write(self, xmlNode* top, const unsigned char* name) except -1:
        """``top`` and its subtree, then its tail; ``name``: the name ``top`` is written with."""
        cdef xmlNode* parent = top
        cdef xmlNode* node = top.children
        if not self.start(top, name):
            self.children_numbers(top)
        else:
            while True:
                if node is NULL:
                    self.end(parent, name if parent is top else parent.name)
                    if parent is top:
                        break
                    node, parent = parent.next, parent.parent
                elif node.type == tree.XML_ELEMENT_NODE and not self.gone(node):
                    if self.start(node, node.name):
                        parent, node = node, node.children
                    else:
                        self.children_numbers(node)
                        node = node.next
                elif node.type in (
                    tree.XML_ELEMENT_NODE, tree.XML_TEXT_NODE, tree.XML_CDATA_SECTION_NODE
                ):
                    node = self.text(node, True)
                else:
                    node = node.next
        # lxml writes the element's tail; within the stripped root, tails join across what went.
        self.text(top.next, top.parent.type == tree.XML_ELEMENT_NODE)
        return 0


    # --- names: what a person calls each numbered element ------------------------------------

    cdef const unsigned char* named_value(self, xmlNode* node, const char* name) except? NULL:
        """The value of ``node``'s attribute ``name`` (valid until the next read), NULL without one."""
        cdef xmlAttr* attr = node.properties
        while attr is not NULL:
            if attr.ns is NULL and strcmp(<const char*>attr.name, name) == 0:
                return self.value_of(attr)
            attr = attr.next
        return NULL

    cdef int add_words(self, const unsigned char* c, bint* space) except -1:
        _reserve(&self.squashed, 5 * strlen(<const char*>c))
        _squash(&self.squashed, c, space, False)
        return 0

    cdef int text_words(self, xmlNode* top, size_t enough) except -1:
        """The text of ``top``'s subtree (not of scripts and styles), squashed into ``squashed``
        until it holds ``enough`` bytes."""
        cdef xmlNode* node = top.children
        cdef bint space = True  # leading whitespace goes
        while node is not NULL and self.squashed.size < enough:
            if node.type == tree.XML_TEXT_NODE or node.type == tree.XML_CDATA_SECTION_NODE:
                if node.content is not NULL:
                    self.add_words(node.content, &space)
            elif node.type == tree.XML_ELEMENT_NODE and node.children is not NULL and not (
                _same(node.name, b"script") or _same(node.name, b"style")
            ):
                node = node.children
                continue
            while node is not top and node.next is NULL:
                node = node.parent
            node = NULL if node is top else node.next
        return 0

    cdef str words(self, Py_ssize_t limit):
        """What ``squashed`` holds, at most ``limit`` characters; None when it is empty."""
        cdef Out* out = &self.squashed
        cdef size_t end = 0
        cdef Py_ssize_t chars = 0
        while out.size and out.data[out.size - 1] == 0x20:
            out.size -= 1
        if out.size == 0:
            return None
        while end < out.size:
            if (out.data[end] & 0xC0) != 0x80:
                if chars == limit:
                    break
                chars += 1
            end += 1
        return PyUnicode_DecodeUTF8(<const char*>out.data, end, NULL)

    cdef str name_of(self, xmlNode* node, dict labels, Py_ssize_t limit):
        """The first of: aria-label, its ``<label for>``'s text, its own text (not of a field),
        placeholder, title, alt, value, name; whitespace collapsed, None when all are blank."""
        cdef const unsigned char* value
        cdef const char* name
        cdef int step
        cdef bint space
        cdef object label
        cdef size_t enough = 4 * limit  # bytes: at least ``limit`` characters
        for step in range(8):
            self.squashed.size = 0
            space = True
            if step == 1:
                value = self.named_value(node, b"id")
                label = None if value is NULL else labels.get(PyBytes_FromString(<const char*>value))
                if label is not None:
                    self.text_words(<xmlNode*><size_t>label, enough)
            elif step == 2:
                if not (_same(node.name, b"input") or _same(node.name, b"select")
                        or _same(node.name, b"textarea")):
                    self.text_words(node, enough)
            else:
                name = (b"aria-label", b"", b"", b"placeholder", b"title", b"alt", b"value",
                        b"name")[step]
                value = self.named_value(node, name)
                if value is not NULL:
                    self.add_words(value, &space)
            words = self.words(limit)
            if words is not None:
                return words
        return None

    cdef dict element_names(self, Py_ssize_t limit):
        """``{number: name}`` of the numbered elements that have one (see :meth:`name_of`)."""
        cdef dict labels = {}  # a for value -> the first label with it
        cdef const unsigned char* value
        for address in self.labels:
            value = self.named_value(<xmlNode*><size_t>address, b"for")
            if value is not NULL:
                labels.setdefault(PyBytes_FromString(<const char*>value), address)
        names = {}
        for number, address in self.numbered.items():
            words = self.name_of(<xmlNode*><size_t>address, labels, limit)
            if words is not None:
                names[number] = words
        return names


def compact_html(
    cetree._Element root, tuple kept, tuple left_out, bytes number_attr, bytes hidden_attr,
    bytes dropped, Py_ssize_t name_chars,
):
    """``(html, numbers)``: what stripping from ``root`` the elements named in ``left_out`` and
    those whose ``hidden_attr`` is "1" (``etree.strip_elements`` without their tails), keeping
    only the attributes named in ``kept`` and squashing text and the values that need it, then
    ``etree.tostring(body or root, method="html").strip()`` would write; and the numbers
    (``number_attr``) of the whole document's elements, as ``int`` reads them. A hidden root was
    renamed ``dropped`` for the strip, and is written so. Third, the names of the numbered
    elements, at most ``name_chars`` characters each (:meth:`_Writer.name_of`)."""
    cdef _Writer writer = _Writer()
    writer.numbers, writer.numbered, writer.labels = set(), {}, []
    _fill(&writer.kept, kept)
    _fill(&writer.left_out, left_out)
    writer.number_attr = number_attr
    writer.hidden_attr = hidden_attr
    cdef xmlNode* node = root._c_node
    cdef xmlNode* top = node.children
    while top is not NULL and not (
        top.type == tree.XML_ELEMENT_NODE and strcmp(<const char*>top.name, b"body") == 0
        and not writer.hidden(top)
    ):
        top = top.next
    if top is NULL:
        top = node
    # Every element of the document is numbered, in every top-level tree (libxml2 makes a second
    # <html> of a raw page a sibling of the first), hidden or not.
    node = node.doc.children
    while node is not NULL:
        writer.numbers_below(node, top)
        node = node.next
    cdef const unsigned char* name = top.name
    if top is root._c_node and writer.hidden(top):
        name = dropped
    writer.write(top, name)
    cdef Out* out = &writer.out
    while out.size and out.data[out.size - 1] == 0x20:  # squashed text ends in one space at most
        out.size -= 1
    html = PyUnicode_DecodeUTF8(<const char*>out.data, out.size, NULL)
    return html, writer.numbers, writer.element_names(name_chars) if writer.numbered else {}
