# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The one walk of a page behind its skeleton, compiled: it reads libxml2's nodes directly and
makes the skeleton itself.

The walk visits every element of every page an action is verified on, and in Python its
per-element cost (an element proxy, its attribute list, its parent, its text and tail) was as
much as parsing the page again. Here no element becomes a Python object (but to write the path of
a background mark that has no number or id): what a tag or an attribute name means is looked up
once per name a page uses, and page text is joined, its whitespace collapsed and cut in one C
buffer per text block, so only what the skeleton keeps (descriptors, kept texts) is made in
Python.

The rules (which tags, roles and classes mean what, and the budgets) are passed in from
:mod:`veriloop.engines.skeleton`, so they are written once.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport PyObject
from cpython.dict cimport PyDict_SetDefault
from cpython.unicode cimport (
    PyUnicode_AsUTF8, PyUnicode_DATA, PyUnicode_DecodeUTF8,
    PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_New, PyUnicode_WRITE,
)
from libc.stdlib cimport calloc, free
from libc.string cimport memchr, memcmp, memcpy, strcmp, strlen, strstr

cimport lxml.includes.etreepublic as cetree
from lxml.includes cimport tree
from lxml.includes.tree cimport xmlAttr, xmlNode

from xxhash import xxh3_64_intdigest

cdef extern from "Python.h":
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(str text)
    dict _PyDict_NewPresized(Py_ssize_t size)

cetree.import_lxml__etree()

include "utf8_space.pxi"


cdef struct Frame:
    xmlNode* node  # the element at this depth
    Py_ssize_t owner  # the depth of the block its children's text joins; -1: not page content
    Py_ssize_t block  # its own text block (an index in the walk's texts); -1: none (yet)
    bint hidden  # the browser does not show it (its subtree neither)
    bint in_message  # it is in a shown message region (hidden elements there are recorded)



cdef inline xmlNode* _element_from(xmlNode* node):
    while node is not NULL and node.type != tree.XML_ELEMENT_NODE:
        node = node.next
    return node


cdef xmlNode* _next_element(xmlNode* node, xmlNode* top):
    """The element after ``node`` in document order, without leaving ``top`` (NULL at the end)."""
    cdef xmlNode* child = _element_from(node.children)
    if child is not NULL:
        return child
    while node is not top and _element_from(node.next) is NULL:
        node = node.parent
    return NULL if node is top else _element_from(node.next)


cdef inline bint _named(xmlAttr* attr, const char* name):
    return attr.ns is NULL and strcmp(<const char*>attr.name, name) == 0


cdef inline bint _is_text(xmlNode* node):
    return node is not NULL and (
        node.type == tree.XML_TEXT_NODE or node.type == tree.XML_CDATA_SECTION_NODE
    )


cdef xmlNode* _next_node(xmlNode* node, xmlNode* top):
    """The node after ``node`` in document order, without leaving ``top`` (NULL at the end)."""
    if node.type == tree.XML_ELEMENT_NODE and node.children is not NULL:
        return node.children
    while node is not top and node.next is NULL:
        node = node.parent
    return NULL if node is top else node.next


cdef enum:
    # What a tag is (bits of a tag's meaning).
    HIDING = 1
    INTERACTIVE = 2
    INLINE = 4
    NOT_CONTENT = 8
    HEADING = 16
    NOT_TEXT = 32
    INPUT = 64  # how a descriptor reads it
    SELECT = 128


cdef enum Meaning:
    # What an attribute's name means to the walk.
    IGNORED, CLASS, STYLE, ID, ROLE, NUMBER, EXPANDED, EDITABLE, LIVE, TOAST, MARK, HIDES,
    ARIA_HIDDEN, REFERENCE


cdef enum Field:
    # What an attribute's name means to a descriptor. The three that can be its key come first,
    # most telling first (they index the candidates).
    KEY, ID_KEY, NAME_KEY, NOT_FIELD, KEEP, FLAG, ARIA_FLAG, TYPE, LABEL


_FIELDS = {"key": KEY, "id": ID_KEY, "name": NAME_KEY, "keep": KEEP, "flag": FLAG,
           "aria_flag": ARIA_FLAG, "type": TYPE, "label": LABEL}  # fmt: skip


cdef class Rules:
    """The skeleton's rules, as the walk reads them (built once by the skeleton module)."""

    cdef frozenset interactive_tags, inline_tags, not_content, not_text, heading_tags, hidden_tags
    cdef frozenset interactive_roles, alert_roles, background_kinds
    cdef tuple alert_class_names  # the same as UTF-8, for class values read in place:
    cdef const char* alert_names[64]  # ... in C
    cdef Py_ssize_t alert_lengths[64]
    cdef Py_ssize_t alert_count
    cdef bytes number_attr, hidden_attr, mark_attr, scroll_attr, viewport_attr
    cdef object hiding_style
    cdef Py_ssize_t max_blocks, max_marks, block_chars, alert_chars, text_chars, value_chars
    cdef bytes background_text
    cdef str background_field
    cdef dict attribute_meanings  # an attribute name (UTF-8) -> its Meaning
    cdef dict fields  # an attribute name -> (its Field, its limit, the descriptor field it sets)

    def __init__(
        self, *, interactive_tags, inline_tags, not_content, not_text, heading_tags, hidden_tags,
        interactive_roles, alert_roles, alert_classes, number_attr, hidden_attr, mark_attr,
        scroll_attr, viewport_attr, reference_attrs, hiding_style, max_blocks, max_marks,
        block_chars, alert_chars, background_text, background_field, background_kinds,
        attribute_kinds, kept_chars, aria_flags, labels, text_chars, value_chars,
    ):
        self.interactive_tags = frozenset(interactive_tags)
        self.inline_tags = frozenset(inline_tags)
        self.not_content = frozenset(not_content)
        self.not_text = frozenset(not_text)
        self.heading_tags = frozenset(heading_tags)
        self.hidden_tags = frozenset(hidden_tags)
        self.interactive_roles = frozenset(interactive_roles)
        self.alert_roles = frozenset(alert_roles)
        self.alert_class_names = tuple(name.encode() for name in alert_classes)
        if len(self.alert_class_names) > 64:
            raise ValueError("at most 64 message classes")
        for name in self.alert_class_names:
            self.alert_names[self.alert_count] = <bytes>name
            self.alert_lengths[self.alert_count] = len(<bytes>name)
            self.alert_count += 1
        self.number_attr = number_attr.encode()
        self.hidden_attr = hidden_attr.encode()
        self.mark_attr = mark_attr.encode()
        self.scroll_attr = scroll_attr.encode()
        self.viewport_attr = viewport_attr.encode()
        # Later entries win: a name the page contract gives a meaning of its own is not a reference.
        self.attribute_meanings = {
            **{name.encode(): REFERENCE for name in reference_attrs},
            b"aria-hidden": ARIA_HIDDEN,
            b"hidden": HIDES,
            self.hidden_attr: HIDES,
            self.mark_attr: MARK,
            b"data-toast": TOAST,
            b"aria-live": LIVE,
            b"contenteditable": EDITABLE,
            b"aria-expanded": EXPANDED,
            self.number_attr: NUMBER,
            b"role": ROLE,
            b"id": ID,
            b"style": STYLE,
            b"class": CLASS,
        }
        self.hiding_style = hiding_style
        self.max_blocks = max_blocks
        self.max_marks = max_marks
        self.block_chars = block_chars
        self.alert_chars = alert_chars
        self.background_text = background_text.encode()
        self.background_field = background_field
        self.background_kinds = frozenset(background_kinds)
        # A kept value's limit is its length; a label's, its rank.
        labels = tuple(labels)
        self.fields = {
            name: (
                _FIELDS[kind],
                kept_chars[name] if kind == "keep" else labels.index(name) if kind == "label" else 0,
                aria_flags[name] if kind == "aria_flag" else name,
            )
            for name, kind in attribute_kinds.items()
        }
        self.text_chars = text_chars
        self.value_chars = value_chars

    cdef int tag_meaning(self, str tag):
        return (
            (HIDING if tag in self.hidden_tags else 0)
            | (INTERACTIVE if tag in self.interactive_tags else 0)
            | (INLINE if tag in self.inline_tags else 0)
            | (NOT_CONTENT if tag in self.not_content else 0)
            | (NOT_TEXT if tag in self.not_text else 0)
            | (HEADING if tag in self.heading_tags else 0)
            | (INPUT if tag == "input" else 0)
            | (SELECT if tag == "select" else 0)
        )

    cdef Meaning attribute_meaning(self, const char* name):
        cdef int meaning = self.attribute_meanings.get(<bytes>name, IGNORED)
        return <Meaning>meaning


# --- names -----------------------------------------------------------------------------------
# A document keeps one copy of each name (libxml2's dictionary), and a page uses a few dozen
# names thousands of times: what a name means is found once, then by the copy's address.

cdef struct Slot:
    const unsigned char* name  # the name's copy; NULL: a free slot
    int meaning  # a tag's bits, an attribute's Meaning
    Field kind  # an attribute's Field
    Py_ssize_t limit  # ... and its limit
    PyObject* text  # the name as a str
    PyObject* field  # the descriptor field an attribute sets


@cython.final
cdef class _Names:
    """What each name means, by its address (an open-addressing table)."""

    cdef Slot* slots
    cdef size_t size, used
    cdef Slot spare  # a new name past the load limit is worked out each time it is met
    cdef list objects  # what the slots point to

    def __cinit__(self, size_t size):
        self.slots = <Slot*>calloc(size, sizeof(Slot))
        if self.slots is NULL:
            raise MemoryError()
        self.size = size
        self.objects = []

    def __dealloc__(self):
        free(self.slots)

    cdef inline Slot* find(self, const unsigned char* name):
        """The slot of ``name``; a free one (``name`` NULL) when it is new: fill it with ``keep``."""
        cdef size_t mask = self.size - 1
        cdef size_t i = <size_t>((<unsigned long long><size_t>name * 0x9E3779B97F4A7C15ULL) >> 40) & mask
        while self.slots[i].name is not NULL and self.slots[i].name != name:
            i = (i + 1) & mask
        if self.slots[i].name is NULL and 4 * self.used >= 3 * self.size:
            self.spare.name = NULL
            return &self.spare
        return &self.slots[i]

    cdef int keep(self, Slot* slot, const unsigned char* name, int meaning, text, field) except -1:
        self.objects += (text, field)
        slot.name, slot.meaning, slot.text, slot.field = name, meaning, <PyObject*>text, <PyObject*>field
        if slot is not &self.spare:
            self.used += 1
        return 0


# --- text blocks ------------------------------------------------------------------------------

cdef struct Text:
    unsigned char* data  # UTF-8, words joined by single spaces
    Py_ssize_t size, capacity
    bint space  # a space is due before the next word
    bint heading


cdef unsigned char _WORD[256]
cdef unsigned char _lone[2]
for _c in range(256):
    # A byte that goes on a word as it is: not whitespace alone (``_unicode_space``'s), nor the
    # lead byte of a Unicode space, which ``_unicode_space`` reads with the bytes after it.
    _lone[0], _lone[1] = _c, 0
    _WORD[_c] = not (_unicode_space(_lone) or _c in b"\xc2\xe1\xe2\xe3")


cdef int _add(Text* text, const unsigned char* c, Py_ssize_t n) except -1:
    """``n`` bytes of UTF-8 text (in a NUL-terminated string, whole characters) added to ``text``:
    each run of whitespace (``str.split``'s) one space between words."""
    cdef Py_ssize_t need = text.size + n + 1, width
    cdef unsigned char* grown
    if need > text.capacity:
        grown = <unsigned char*>PyMem_Realloc(text.data, 2 * need)
        if grown is NULL:
            raise MemoryError()
        text.data, text.capacity = grown, 2 * need
    cdef const unsigned char* end = c + n
    cdef const unsigned char* run
    cdef unsigned char* o = text.data + text.size
    cdef bint space = text.space
    while c < end:
        if not _WORD[c[0]]:
            width = _unicode_space(c)
            if width:
                space = True
                c += width
                continue
        if space and o != text.data:
            o[0] = 0x20
            o += 1
        space = False
        # A run of words with one ASCII space between each two (as it is written, a space is due
        # there anyway), copied at once; its first byte may be a lead byte the table stops at.
        run = c
        c += 1
        while c < end:
            if _WORD[c[0]]:
                c += 1
            elif c[0] == 0x20 and c + 1 < end and _WORD[c[1]]:
                c += 2
            else:
                break
        memcpy(o, run, c - run)
        o += c - run
    text.size = o - text.data
    text.space = space
    return 0


cdef Py_ssize_t _prefix(const unsigned char* s, Py_ssize_t n, Py_ssize_t chars):
    """The length in bytes of the first ``chars`` characters of ``s`` (UTF-8, ``n`` bytes)."""
    cdef Py_ssize_t i
    for i in range(n):
        if (s[i] & 0xC0) != 0x80:
            if chars == 0:
                return i
            chars -= 1
    return n


cdef inline str _decoded(const unsigned char* c):
    return PyUnicode_DecodeUTF8(<const char*>c, strlen(<const char*>c), NULL)


cdef str _stripped(const unsigned char* c, Py_ssize_t limit):
    """``value.strip()[:limit]`` of the value ``c`` (UTF-8, NUL-terminated), None when it strips
    to nothing: made once from the bytes, not a str, its strip and its cut."""
    cdef Py_ssize_t width, chars = 0
    while True:
        width = _unicode_space(c)
        if not width:
            break
        c += width
    if c[0] == 0:
        return None
    cdef const unsigned char* end = c  # after the last character that is not whitespace
    cdef const unsigned char* p = c
    while p[0] != 0 and chars < limit:
        if 0x20 < p[0] < 0x7F:  # printable ASCII, the usual case
            p += 1
            end = p
        else:
            width = _unicode_space(p)
            if width:
                p += width
            else:
                p += 1
                while (p[0] & 0xC0) == 0x80:
                    p += 1
                end = p
        chars += 1
    if _has_words(p):  # the cut falls inside the stripped value: its whitespace there stays
        end = p
    return PyUnicode_DecodeUTF8(<const char*>c, end - c, NULL)


@cython.final
cdef class _Count:
    """A count kept in a dict, counted without making an int each time."""

    cdef Py_ssize_t n


cdef str _numbered(str name, Py_ssize_t n):
    """``f"{name}[{n}]"`` (``n`` >= 0), written in one str: no int, no str of its digits."""
    cdef char digits[20]
    cdef Py_ssize_t count = 0, length = PyUnicode_GET_LENGTH(name), i
    while True:
        digits[count] = 0x30 + n % 10
        count += 1
        n //= 10
        if n == 0:
            break
    cdef str numbered = PyUnicode_New(length + count + 2, PyUnicode_MAX_CHAR_VALUE(name))
    cdef int kind = PyUnicode_KIND(numbered)  # the kind of ``name``: its characters copy as they are
    cdef void* data = PyUnicode_DATA(numbered)
    memcpy(data, PyUnicode_DATA(name), length * kind)
    PyUnicode_WRITE(kind, data, length, 0x5B)
    for i in range(count):
        PyUnicode_WRITE(kind, data, length + 1 + i, digits[count - 1 - i])
    PyUnicode_WRITE(kind, data, length + count + 1, 0x5D)
    return numbered


cdef unsigned char _NOT_DIGIT[256]  # 1 for the bytes a cut block's digest reads
for _c in range(256):
    _NOT_DIGIT[_c] = not 0x30 <= _c <= 0x39


cdef unsigned long long _digest_without_digits(const unsigned char* s, Py_ssize_t n) except? 0:
    """``xxh3_64_intdigest(s[:n].translate(None, b"0123456789"))``: the other bytes copied once,
    without a branch per byte (``bytes.translate`` was a tenth of the walk on pages of text)."""
    cdef unsigned char small[4096]
    cdef unsigned char* buffer = small
    cdef Py_ssize_t i, kept = 0
    if n > 4096:
        buffer = <unsigned char*>PyMem_Malloc(n)
        if buffer is NULL:
            raise MemoryError()
    try:
        for i in range(n):
            buffer[kept] = s[i]  # written always, kept only when it is not a digit
            kept += _NOT_DIGIT[s[i]]
        return xxh3_64_intdigest(PyBytes_FromStringAndSize(<char*>buffer, kept))
    finally:
        if buffer is not small:
            PyMem_Free(buffer)


cdef str _kept(Text* text, Py_ssize_t limit):
    """The text cut to ``limit`` characters; a longer one ends in ``…#`` and a digest of all of
    it: of its text without digits, spelled in letters, so a digit-only change past the cut stays
    digit-only and masking a kept text never touches its digest."""
    cdef const unsigned char* s = text.data
    cdef Py_ssize_t cut = _prefix(s, text.size, limit), n
    if cut == text.size:
        return PyUnicode_DecodeUTF8(<const char*>s, text.size, NULL)
    # An identity of the block, never a seal (a crafted collision could only hide an edit past the
    # cut: a change seen as none, never a success), so XXH3, in a fraction of BLAKE2b's time.
    cdef unsigned long long digest = _digest_without_digits(s, text.size)
    cdef char letters[10]
    for n in range(10):  # 40 bits as hex digits 0-f written as the letters g-v
        letters[n] = 0x67 + ((digest >> (4 * n)) & 0xF)
    return PyUnicode_DecodeUTF8(<const char*>s, cut, NULL) + "…#" + letters[:10].decode("ascii")


@cython.final
cdef class _Texts:
    """Text blocks as their parts come: each block is what ``" ".join(" ".join(parts).split())``
    makes of its parts, built as they are added."""

    cdef Text* items
    cdef Py_ssize_t count, capacity

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.count):
            PyMem_Free(self.items[i].data)
        PyMem_Free(self.items)

    cdef Py_ssize_t open(self, bint heading) except -1:
        """A new, empty block; its index."""
        cdef Text* grown
        if self.count == self.capacity:
            grown = <Text*>PyMem_Realloc(self.items, (2 * self.capacity + 16) * sizeof(Text))
            if grown is NULL:
                raise MemoryError()
            self.items = grown
            self.capacity = 2 * self.capacity + 16
        cdef Text* text = &self.items[self.count]
        text.data, text.size, text.capacity, text.space, text.heading = NULL, 0, 0, False, heading
        self.count += 1
        return self.count - 1

    cdef inline int add(self, Py_ssize_t block, const unsigned char* c) except -1:
        """Text (UTF-8, NUL-terminated) added to the part of ``block`` that is being added."""
        return _add(&self.items[block], c, strlen(<const char*>c))

    cdef inline void part(self, Py_ssize_t block):
        """A new part of ``block`` begins: parts are joined by a space."""
        self.items[block].space = True

    cdef str kept(self, Py_ssize_t block, Py_ssize_t limit):
        return _kept(&self.items[block], limit)


cdef struct Nodes:
    void** items
    Py_ssize_t count, capacity


cdef int _push(Nodes* nodes, void* node) except -1:
    cdef void** grown
    if nodes.count == nodes.capacity:
        grown = <void**>PyMem_Realloc(nodes.items, (2 * nodes.capacity + 16) * sizeof(void*))
        if grown is NULL:
            raise MemoryError()
        nodes.items, nodes.capacity = grown, 2 * nodes.capacity + 16
    nodes.items[nodes.count] = node
    nodes.count += 1
    return 0


cdef bint _has_words(const unsigned char* c):
    """``c`` has a character that is not whitespace."""
    cdef Py_ssize_t width
    while c[0] != 0:
        width = _unicode_space(c)
        if not width:
            return True
        c += width
    return False


cdef bint _run_has_words(xmlNode* node):
    """The text in the text nodes from ``node`` on has a character that is not whitespace."""
    while _is_text(node):
        if node.content is not NULL and _has_words(node.content):
            return True
        node = node.next
    return False


cdef const unsigned char* _simple_value(xmlAttr* attr):
    """The value of ``attr`` in place when it is one text node ("" for none), else NULL."""
    cdef xmlNode* value = attr.children
    if value is NULL:
        return <const unsigned char*>b""
    if value.next is NULL and value.type == tree.XML_TEXT_NODE and value.content is not NULL:
        return value.content
    return NULL


cdef bint _has_token(const unsigned char* c, Rules rules):
    """One of the message classes is among the whitespace-separated tokens of ``c`` (UTF-8)."""
    cdef const unsigned char* start
    cdef Py_ssize_t width, n, i
    while c[0] != 0:
        width = _unicode_space(c)
        if width:
            c += width
            continue
        start = c
        while c[0] != 0 and not _unicode_space(c):
            c += 1
        n = c - start
        for i in range(rules.alert_count):
            if rules.alert_lengths[i] == n and memcmp(rules.alert_names[i], start, n) == 0:
                return True
    return False


# --- the walk ---------------------------------------------------------------------------------

@cython.final
cdef class _Walk:
    """The walk of one page: what it found so far."""

    cdef Rules rules
    cdef cetree._Document doc
    cdef _Names tags, attributes
    cdef set references  # the ids that fields name as their messages (so far)
    cdef bint all_references  # ``references`` were all found before the walk
    cdef Nodes unnamed  # id attributes met before a field named them (when not all found)
    cdef _Texts texts  # the content layer, blocks in the order of their first text
    cdef bint truncated  # text past the block budget was left out
    cdef Frame* frames
    cdef Py_ssize_t capacity
    cdef list tagged  # shown elements with an interactive tag: key or None, descriptor, ...
    cdef Nodes tagged_nodes  # and the elements
    cdef list extra  # other shown elements kept (a role, a number, aria-expanded alone), the same way
    cdef Nodes extra_nodes
    cdef Nodes messages  # shown message regions by convention, in page order
    cdef Nodes referenced  # shown elements a field names (messages after the conventional ones)
    cdef Nodes marked  # shown elements with a background mark
    cdef object key  # the key of the element last described (None: it has none)
    cdef str held  # the value last read that was not in place
    cdef set hidden  # hidden elements inside shown message regions (the only place asked)
    cdef set ticking  # marked elements whose text changes on its own

    def __cinit__(self, Rules rules, cetree._Document doc):
        self.rules, self.doc = rules, doc
        self.tags, self.attributes = _Names(256), _Names(1024)
        self.references, self.texts = set(), _Texts()
        self.tagged, self.extra, self.hidden, self.ticking = [], [], set(), set()
        self.capacity = 64
        self.frames = <Frame*>PyMem_Malloc(self.capacity * sizeof(Frame))
        if self.frames is NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.frames)
        PyMem_Free(self.unnamed.items)
        PyMem_Free(self.tagged_nodes.items)
        PyMem_Free(self.extra_nodes.items)
        PyMem_Free(self.messages.items)
        PyMem_Free(self.referenced.items)
        PyMem_Free(self.marked.items)

    cdef Slot* tag_slot(self, xmlNode* node):
        """``node``'s tag (it has no namespace)."""
        cdef Slot* slot = self.tags.find(node.name)
        if slot.name is NULL:
            tag = cetree.namespacedName(node)
            self.tags.keep(slot, node.name, self.rules.tag_meaning(tag), tag, None)
        return slot

    cdef inline int tag_bits(self, xmlNode* node):
        return 0 if node.ns is not NULL else self.tag_slot(node).meaning

    cdef str tag(self, xmlNode* node):
        if node.ns is not NULL:
            return cetree.namespacedName(node)
        return <str>self.tag_slot(node).text

    cdef Slot* attribute_slot(self, xmlAttr* attr):
        """``attr``'s name (it has no namespace)."""
        cdef Slot* slot = self.attributes.find(attr.name)
        if slot.name is NULL:
            field = cetree.namespacedNameFromNsName(NULL, attr.name)
            meaning = self.rules.attribute_meaning(<const char*>attr.name)
            kind, limit, sets = self.rules.fields.get(field, (NOT_FIELD, 0, None))
            self.attributes.keep(slot, attr.name, meaning, field, sets)
            slot.kind, slot.limit = kind, limit
        return slot

    cdef const unsigned char* value(self, xmlNode* node, xmlAttr* attr) except NULL:
        """The value of ``node``'s ``attr`` (UTF-8): in place when it is one text node, else the
        text of a str held until the next call."""
        cdef const unsigned char* value = _simple_value(attr)
        if value is NULL:
            self.held = cetree.attributeValue(node, attr)
            value = <const unsigned char*>PyUnicode_AsUTF8(self.held)
        return value

    cdef int find_references(self, xmlNode* top) except -1:
        """All ids that fields name as their messages (the tokens of their reference attributes),
        before the walk."""
        cdef xmlNode* node = top
        cdef xmlAttr* attr
        while node is not NULL:
            attr = node.properties
            while attr is not NULL:
                if attr.ns is NULL and self.attribute_slot(attr).meaning == REFERENCE:
                    self.references.update(cetree.attributeValue(node, attr).split())
                attr = attr.next
            node = _next_element(node, top)
        self.all_references = True
        return 0

    cdef bint named_late(self) except -1:
        """A field named an element the walk had passed (the walk must be done again, with all
        references found first)."""
        cdef Py_ssize_t i
        cdef xmlAttr* attr
        if not self.references:
            return False
        for i in range(self.unnamed.count):
            attr = <xmlAttr*>self.unnamed.items[i]
            if cetree.attributeValue(attr.parent, attr) in self.references:
                return True
        return False

    cdef int run(self, xmlNode* top) except -1:
        """Every element of ``top`` once, in document order."""
        cdef xmlNode* body = _element_from(top.children)
        while body is not NULL and not (body.ns is NULL and strcmp(<const char*>body.name, b"body") == 0):
            body = _element_from(body.next)
        # Frame 0 stands for the parent of ``top``: shown, and its text is not page content.
        cdef Frame* frame = self.frames
        frame.node, frame.owner, frame.block, frame.hidden, frame.in_message = NULL, -1, -1, False, False
        self.visit(top, 1, body)
        cdef Py_ssize_t depth = 1
        cdef xmlNode* node = _element_from(top.children)
        while True:
            if node is not NULL:
                if depth + 1 >= self.capacity:
                    frame = <Frame*>PyMem_Realloc(self.frames, 2 * self.capacity * sizeof(Frame))
                    if frame is NULL:
                        raise MemoryError()
                    self.frames, self.capacity = frame, 2 * self.capacity
                depth += 1
                self.visit(node, depth, body)
                node = _element_from(node.children)
            elif depth == 1:
                break
            else:
                node = _element_from(self.frames[depth].node.next)
                depth -= 1
        return 0

    cdef int visit(self, xmlNode* node, Py_ssize_t depth, xmlNode* body) except -1:
        """``node``, at ``depth`` (its parent's frame is the one before)."""
        cdef Rules rules = self.rules
        cdef Frame* parent = &self.frames[depth - 1]
        cdef Frame* frame = &self.frames[depth]
        frame.node, frame.owner, frame.block, frame.in_message = node, -1, -1, parent.in_message
        cdef int bits = self.tag_bits(node)
        cdef bint hides = bits & HIDING
        cdef bint message = False, named = False, skip = False, tick = False
        cdef bint interactive = False, expandable = False, marked = False
        cdef xmlAttr* attr = node.properties
        cdef const unsigned char* value
        cdef Meaning meaning
        while attr is not NULL:
            if attr.ns is not NULL:
                attr = attr.next
                continue
            meaning = <Meaning>self.attribute_slot(attr).meaning
            if meaning == IGNORED:
                pass
            elif meaning == CLASS:
                if not message:
                    message = _has_token(self.value(node, attr), rules)
            elif meaning == STYLE:
                value = self.value(node, attr)
                if (
                    strstr(<const char*>value, b"none") is not NULL
                    or strstr(<const char*>value, b"hidden") is not NULL
                ) and rules.hiding_style.search(_decoded(value)):
                    hides = True
            elif meaning == ID:
                named = bool(self.references) and cetree.attributeValue(node, attr) in self.references
                if not (named or self.all_references):
                    _push(&self.unnamed, attr)  # a field after it may name it
            elif meaning == REFERENCE:
                if not self.all_references:
                    self.references.update(cetree.attributeValue(node, attr).split())
            elif meaning == ROLE:
                role = cetree.attributeValue(node, attr)
                if role in rules.interactive_roles:
                    interactive = True
                elif role in rules.alert_roles:
                    message = True
            elif meaning == NUMBER:
                interactive = True
            elif meaning == EXPANDED:
                expandable = True
            elif meaning == EDITABLE:
                if cetree.attributeValue(node, attr) != "false":
                    interactive = True
                    skip = True  # its text is the descriptor's, not page content
            elif meaning == LIVE:
                if cetree.attributeValue(node, attr) != "off":
                    message = True
            elif meaning == TOAST:
                message = True
            elif meaning == MARK:
                marked = True
                if "text" in cetree.attributeValue(node, attr).split():
                    tick = True
            elif meaning == HIDES:
                hides = True
            elif meaning == ARIA_HIDDEN:
                if cetree.attributeValue(node, attr) == "true":
                    hides = True
            attr = attr.next
        frame.hidden = hides or parent.hidden
        cdef bint shown = not frame.hidden
        if shown:
            if bits & INTERACTIVE:
                self.keep(self.tagged, &self.tagged_nodes, node, bits, True)
            elif interactive or expandable:
                self.keep(self.extra, &self.extra_nodes, node, bits, interactive)
        elif parent.in_message:
            self.hidden.add(<size_t>node)
        if tick:
            self.ticking.add(<size_t>node)
        if marked and shown:
            _push(&self.marked, node)
        if (message or named) and shown:
            if message:
                _push(&self.messages, node)
            if named:
                _push(&self.referenced, node)
            skip = True
            frame.in_message = True
        # The page text: ``body``'s is the first block; text inside the rest joins its block (its
        # own, or its parent's when it is inline).
        if node is body:
            frame.owner = depth
            self.add_text(depth, node.children)
            return 0
        cdef Py_ssize_t outer = parent.owner
        if outer < 0:
            return 0
        if skip or hides or bits & NOT_CONTENT:
            pass
        elif tick:
            self.add_background(outer if bits & INLINE else depth)
        else:
            frame.owner = outer if bits & INLINE else depth
            self.add_text(frame.owner, node.children)
        self.add_text(outer, node.next)  # its tail
        return 0

    cdef int keep(self, list kept, Nodes* nodes, xmlNode* node, int bits, bint interactive) except -1:
        desc = self.describe(node, self.tag(node), bits, interactive)
        if desc is not None:
            kept += (self.key, desc)
            _push(nodes, node)
        return 0

    cdef Py_ssize_t block(self, Py_ssize_t owner, bint words) except -2:
        """The block of ``frames[owner]`` for a part (``words``: it has some, else it does not
        start a block); -1: the part is left out. A new block counts against the budget."""
        cdef Frame* frame = &self.frames[owner]
        if self.truncated:
            return -1
        if frame.block < 0:
            if not words:
                return -1
            if self.texts.count >= self.rules.max_blocks:
                self.truncated = True
                return -1
            frame.block = self.texts.open(self.is_heading(frame.node))
        self.texts.part(frame.block)
        return frame.block

    cdef int add_text(self, Py_ssize_t owner, xmlNode* run) except -1:
        """The text of the text nodes from ``run`` on (an element's text or tail), as one part."""
        if not _is_text(run):
            return 0
        cdef Py_ssize_t block = self.block(
            owner, self.frames[owner].block >= 0 or _run_has_words(run)
        )
        if block < 0:
            return 0
        while _is_text(run):
            if run.content is not NULL:
                self.texts.add(block, run.content)
            run = run.next
        return 0

    cdef int add_background(self, Py_ssize_t owner) except -1:
        """Marked text that changes on its own, as one part: it stands as ``background_text``."""
        cdef Py_ssize_t block = self.block(owner, True)
        if block >= 0:
            self.texts.add(block, self.rules.background_text)
        return 0

    cdef bint is_heading(self, xmlNode* node) except -1:
        if self.tag_bits(node) & HEADING:
            return True
        return cetree.attributeValueFromNsName(node, NULL, <const unsigned char*>b"role") == "heading"

    cdef int message_texts(self, xmlNode* region, dict alerts) except -1:
        """The texts of a message region as alerts, one per block (the nearest ancestor that is not
        inline); text the snapshot marked as background stands as one ``background_text``, as in
        a content block."""
        cdef _Texts texts = _Texts()
        cdef dict owners = {}  # block owner address -> block
        replaced = set()
        cdef xmlNode* node = _next_node(region, region)
        cdef xmlNode* owner
        cdef xmlNode* ticked
        cdef const unsigned char* text
        cdef int bits
        while node is not NULL:
            if _is_text(node):
                text = node.content
                if text is NULL:
                    text = <const unsigned char*>b""
                if text[0] == 0 or _has_words(text):
                    owner, ticked = node.parent, NULL
                    while owner is not NULL:
                        bits = self.tag_bits(owner)
                        if bits & NOT_TEXT or (self.hidden and <size_t>owner in self.hidden):
                            owner = NULL
                        else:
                            if self.ticking and <size_t>owner in self.ticking:
                                ticked = owner
                            if not (bits & INLINE) or owner is region:
                                break
                            owner = owner.parent
                    if owner is not NULL and not (ticked is not NULL and <size_t>ticked in replaced):
                        if ticked is not NULL:
                            replaced.add(<size_t>ticked)
                            text = self.rules.background_text
                        block = owners.get(<size_t>owner)
                        if block is None:
                            block = owners[<size_t>owner] = texts.open(False)
                        texts.part(block)
                        texts.add(block, text)
            node = _next_node(node, region)
        for block in range(texts.count):
            if texts.items[block].size:
                alerts[str(len(alerts))] = texts.kept(block, self.rules.alert_chars)
        return 0

    cdef tuple locator(self, xmlNode* node):
        """How to find ``node`` again in the next snapshot: its number, its id, else its path."""
        number = cetree.attributeValueFromNsName(node, NULL, self.rules.number_attr)
        if number:
            return "number", number
        el_id = cetree.attributeValueFromNsName(node, NULL, <const unsigned char*>b"id")
        if el_id:
            return "id", el_id
        element = cetree.elementFactory(self.doc, node)
        return "path", element.getroottree().getpath(element)

    cdef list background(self, dict keys, dict elements):
        """Record the snapshot's background marks (on shown elements) on the descriptors of the
        elements they are in, and as locators for the next page."""
        cdef Rules rules = self.rules
        cdef xmlNode* node
        cdef xmlNode* holder
        cdef Py_ssize_t i
        field = rules.background_field
        found = []
        for i in range(self.marked.count):
            node = <xmlNode*>self.marked.items[i]
            value = cetree.attributeValueFromNsName(node, NULL, rules.mark_attr) or ""
            kinds = sorted(set(value.split()).intersection(rules.background_kinds))
            if not kinds:
                continue
            holder = node
            while holder is not NULL and holder.type == tree.XML_ELEMENT_NODE:
                key = keys.get(<size_t>holder)
                if key is not None:
                    desc = elements[key]
                    desc[field] = " ".join(sorted(set(desc.get(field, "").split()).union(kinds)))
                holder = holder.parent
            if len(found) < rules.max_marks:
                found.append([*self.locator(node), " ".join(kinds)])
        return found

    cdef dict skeleton(self, xmlNode* top):
        """The skeleton of what the walk found."""
        cdef Rules rules = self.rules
        cdef xmlNode* node
        cdef xmlNode* ancestor
        cdef Nodes* nodes
        cdef Py_ssize_t i, n
        elements = _PyDict_NewPresized(self.tagged_nodes.count + self.extra_nodes.count)
        keys = {}  # element address -> key, for background marks
        unkeyed = {}  # tag -> how many elements with it had no key
        # Interactive tags, then the elements kept for a role, a number or aria-expanded alone.
        for kept in (self.tagged, self.extra):
            nodes = &self.tagged_nodes if kept is self.tagged else &self.extra_nodes
            for i in range(nodes.count):
                key, desc = (<list>kept)[2 * i], (<list>kept)[2 * i + 1]
                if not key:
                    tag = self.tag(<xmlNode*>nodes.items[i])
                    count = unkeyed.get(tag)
                    if count is None:
                        count = unkeyed[tag] = _Count()
                    key = _numbered(tag, (<_Count>count).n)
                    (<_Count>count).n += 1
                if PyDict_SetDefault(elements, key, desc) is not <PyObject*>desc:  # taken
                    n = 2
                    while _numbered(key, n) in elements:
                        n += 1
                    key = _numbered(key, n)
                    elements[key] = desc
                if self.marked.count:
                    keys[<size_t>nodes.items[i]] = key
        alerts = {}
        taken = set()
        for i in range(self.messages.count + self.referenced.count):
            # A message nested in another message (div.alert inside role=alert) is the same message.
            if i < self.messages.count:
                node = <xmlNode*>self.messages.items[i]
            else:
                node = <xmlNode*>self.referenced.items[i - self.messages.count]
            address = <size_t>node
            if address in taken:
                continue
            ancestor = node.parent
            while ancestor is not NULL and <size_t>ancestor not in taken:
                ancestor = ancestor.parent
            if ancestor is not NULL:
                continue
            taken.add(address)
            # One entry per text block of the region: a new message is never cut off or glued on.
            self.message_texts(node, alerts)
        background = self.background(keys, elements)
        headings, texts = [], []
        for block in range(self.texts.count):
            (headings if self.texts.items[block].heading else texts).append(
                self.texts.kept(block, rules.block_chars)
            )
        scroll = {}
        for name, attribute in (("position", rules.scroll_attr), ("viewport", rules.viewport_attr)):
            value = cetree.attributeValueFromNsName(top, NULL, <bytes>attribute)
            if value is not None:
                scroll[name] = value
        return {
            "elements": elements,
            "alerts": alerts,
            "content": {"headings": headings, "texts": texts, "truncated": self.truncated},
            "background": background,
            "scroll": scroll,
        }

    cdef dict describe(self, xmlNode* node, str tag, int bits, bint interactive):
        """The descriptor of a kept element (``bits``: what its tag is; ``interactive``: False for
        a container kept for its ``aria-expanded`` alone, whose text is page content), its key (or
        None) in ``self.key``; None for ``input type=hidden``. One pass over the element's own attributes (usually 1-4),
        reading values in place: only what the descriptor keeps becomes a str."""
        cdef Rules rules = self.rules
        cdef Slot* slot
        cdef xmlAttr* keys[3]  # the attribute of each Field that can be the key
        keys[0] = keys[1] = keys[2] = NULL
        cdef xmlAttr* label = NULL
        cdef Py_ssize_t label_rank = 0, i
        cdef const unsigned char* value
        desc = {"tag": tag}
        cdef xmlAttr* attr = node.properties
        while attr is not NULL:
            if attr.ns is not NULL:
                attr = attr.next
                continue
            slot = self.attribute_slot(attr)
            if slot.kind == KEEP:
                kept = _stripped(self.value(node, attr), slot.limit)
                if kept is not None:
                    desc[<object>slot.field] = kept
            elif slot.kind == FLAG:
                desc[<object>slot.field] = True
            elif slot.kind == ARIA_FLAG:
                if strcmp(<const char*>self.value(node, attr), b"true") == 0:
                    desc[<object>slot.field] = True
            elif slot.kind <= NAME_KEY:
                keys[<int>slot.kind] = attr
            elif slot.kind == TYPE:
                if bits & INPUT:
                    desc["type"] = _decoded(self.value(node, attr)).strip().lower()
            elif slot.kind == LABEL:  # the first of the most telling kind
                if label is NULL or slot.limit < label_rank:
                    label, label_rank = attr, slot.limit
            attr = attr.next
        if bits & INPUT:
            if desc.setdefault("type", "text") == "hidden":
                return None
        elif bits & SELECT:
            _describe_select(rules, node, desc)
        else:
            text = _element_text(node, rules.text_chars)
            if text:
                desc["text"] = text
        if label is not NULL and "text" not in desc:
            desc["label"] = " ".join(_decoded(self.value(node, label)).split())[: rules.text_chars]
        if not interactive:
            desc.pop("text", None)  # a container's text is page content, its state is its own
        self.key = None
        for i in range(3):
            if keys[i] is not NULL:
                value = self.value(node, keys[i])
                if value[0] != 0:
                    self.key = _decoded(value)
                    break
        return desc


def walk(cetree._Element root, Rules rules):
    """The skeleton of the page ``root`` (see ``skeleton_from_tree``)."""
    cdef xmlNode* top = root._c_node
    # The ids fields name are found as the walk goes: a field usually names what follows it, and
    # a walk to find them first cost a quarter of the walk. Only a page where a field named an
    # element the walk had passed is walked again, with them found first.
    cdef _Walk result = _Walk(rules, root._doc)
    result.run(top)
    if result.named_late():
        result = _Walk(rules, root._doc)
        result.find_references(top)
        result.run(top)
    return result.skeleton(top)


cdef inline bint _is_script(xmlNode* node):
    return node.ns is NULL and (
        strcmp(<const char*>node.name, b"script") == 0 or strcmp(<const char*>node.name, b"style") == 0
    )


cdef str _element_text(xmlNode* top, Py_ssize_t limit):
    """The text an element shows (script and style text is not shown), whitespace collapsed, at
    most ``limit`` characters; only its first ``40 * limit`` characters are read, so a huge
    contenteditable costs no more than a button."""
    if _is_script(top):
        return ""
    cdef Py_ssize_t budget = 40 * limit, n
    cdef const unsigned char* c
    cdef Text text
    text.data, text.size, text.capacity, text.space = NULL, 0, 0, False
    cdef xmlNode* node = top.children
    try:
        # Read until the budget is spent or the text is long enough (4 bytes or more a character).
        while node is not NULL and budget > 0 and text.size < 4 * limit:
            if node.type == tree.XML_TEXT_NODE or node.type == tree.XML_CDATA_SECTION_NODE:
                if node.content is not NULL:
                    c = node.content
                    n = 0
                    while c[n] != 0:
                        if (c[n] & 0xC0) != 0x80:
                            if budget == 0:
                                break
                            budget -= 1
                        n += 1
                    _add(&text, c, n)
            elif node.type == tree.XML_ELEMENT_NODE and node.children is not NULL and not _is_script(node):
                node = node.children
                continue
            while node is not top and node.next is NULL:
                node = node.parent
            node = NULL if node is top else node.next
        return PyUnicode_DecodeUTF8(<const char*>text.data, _prefix(text.data, text.size, limit), NULL)
    finally:
        PyMem_Free(text.data)


cdef void _describe_select(Rules rules, xmlNode* select, dict desc) except *:
    """A select shows its selected option: that option's text, and its value unless the snapshot
    wrote one. The option shown is the first marked selected, else the first (as a browser)."""
    cdef xmlNode* option = NULL
    cdef xmlNode* node = _next_element(select, select)
    while node is not NULL:
        if node.ns is NULL and strcmp(<const char*>node.name, b"option") == 0:
            if cetree.attributeValueFromNsName(node, NULL, <const unsigned char*>b"selected") is not None:
                option = node
                break
            if option is NULL:
                option = node
        node = _next_element(node, select)
    if option is NULL:
        return
    text = _element_text(option, rules.text_chars)
    if text:
        desc["text"] = text
    if "value" not in desc:
        value = (
            cetree.attributeValueFromNsName(option, NULL, <const unsigned char*>b"value") or text
        )[: rules.value_chars]
        if value:
            desc["value"] = value


# --- the bounded-markup scan (see markup_guard) -------------------------------------------------
# Start tags and their attributes as ``markup_guard`` defines them: its grammar, read byte by byte.
# Every quantifier there is possessive and its alternatives start with different characters, so a
# single forward reading finds what the regular expressions found.

cdef inline bint _space(unsigned char c):
    return c == 0x20 or 0x09 <= c <= 0x0D  # a bytes pattern's \s


cdef inline bint _letter(unsigned char c):
    return 0x61 <= (c | 0x20) <= 0x7A


cdef inline bint _word_end(unsigned char c):
    """Ends ``[^\\s/><]*``: a stray character's run."""
    return _space(c) or c == 0x2F or c == 0x3E or c == 0x3C


cdef Py_ssize_t _tag_name_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i):
    """The end of ``<[/!?]?[A-Za-z][^\\s<>/]*`` at ``i`` (a '<'), or -1."""
    i += 1
    if i < n and (s[i] == 0x2F or s[i] == 0x21 or s[i] == 0x3F):
        i += 1
    if i >= n or not _letter(s[i]):
        return -1
    i += 1
    while i < n and not _word_end(s[i]):
        i += 1
    return i


cdef Py_ssize_t _attribute_end(const unsigned char* s, Py_ssize_t n, Py_ssize_t i):
    """The end of the attribute read from ``i`` (separators first), or -1 where none starts."""
    cdef Py_ssize_t j
    cdef unsigned char c
    cdef const unsigned char* quote
    while i < n and (_space(s[i]) or s[i] == 0x2F):
        i += 1
    if i >= n or s[i] == 0x3E:
        return -1
    c = s[i]
    if c == 0x22 or c == 0x27 or c == 0x3D or c == 0x3C:  # a stray quote, '=' or '<'
        if c == 0x3C:  # ... unless it opens a tag name
            j = i + 1
            if j < n and (s[j] == 0x2F or s[j] == 0x21 or s[j] == 0x3F):
                j += 1
            if j < n and _letter(s[j]):
                return -1
        i += 1
        while i < n and not _word_end(s[i]):
            i += 1
        return i
    # A name, then maybe ``= value``: quoted when its quote closes, else bare.
    i += 1
    while i < n and not (_word_end(s[i]) or s[i] == 0x3D or s[i] == 0x22 or s[i] == 0x27):
        i += 1
    j = i
    while j < n and _space(s[j]):
        j += 1
    if j >= n or s[j] != 0x3D:
        return i
    j += 1
    while j < n and _space(s[j]):
        j += 1
    if j < n and (s[j] == 0x22 or s[j] == 0x27):
        quote = <const unsigned char*>memchr(s + j + 1, s[j], n - j - 1)
        if quote is not NULL:
            return quote - s + 1
    while j < n and not (_space(s[j]) or s[j] == 0x3E):
        j += 1
    return j


cdef Py_ssize_t _attributes_end(
    const unsigned char* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t limit, Py_ssize_t* count
):
    """The end of at most ``limit`` attributes read from ``i``; ``count``: how many."""
    cdef Py_ssize_t end
    count[0] = 0
    while count[0] < limit:
        end = _attribute_end(s, n, i)
        if end < 0:
            break
        i = end
        count[0] += 1
    return i


def crowded_tag(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t limit):
    """Where the first start tag at or after ``start`` with more than ``limit`` attributes
    begins (-1: none)."""
    cdef const unsigned char* s = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t n = data.shape[0], i = start, end, count
    cdef const unsigned char* found
    while i < n:
        found = <const unsigned char*>memchr(s + i, 0x3C, n - i)
        if found is NULL:
            return -1
        i = found - s
        end = _tag_name_end(s, n, i)
        if end >= 0:
            _attributes_end(s, n, end, limit + 1, &count)
            if count > limit:
                return i
        i += 1
    return -1


def attribute_ends(const unsigned char[::1] data, Py_ssize_t at, Py_ssize_t limit):
    """``(end of its first limit attributes, end of all of them)`` of the start tag at ``at``."""
    cdef const unsigned char* s = &data[0]
    cdef Py_ssize_t n = data.shape[0], count
    cdef Py_ssize_t cut = _attributes_end(s, n, _tag_name_end(s, n, at), limit, &count)
    return cut, _attributes_end(s, n, cut, PY_SSIZE_T_MAX, &count)
