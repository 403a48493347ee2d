# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The one walk of a page behind its skeleton, compiled: it reads libxml2's nodes directly.

The walk visits every element of every page an action is verified on, and in
Python its per-element cost (an element proxy, its attribute list, its parent,
its text and tail) was as much as parsing the page again. Here an element
becomes a Python object only when the skeleton keeps it (an interactive
element, a message, a background mark); names are compared as C strings and
text joins its block through a table of node addresses.

What it finds is :func:`veriloop.engines.skeleton.skeleton_from_tree`'s to
use; the rules (which tags, roles and classes mean what) are passed in from
there, so they are written once.
"""

from libc.stdlib cimport free, malloc, realloc
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memchr, strcmp

cimport lxml.includes.etreepublic as cetree
from lxml.includes cimport tree
from lxml.includes.tree cimport xmlAttr, xmlNode

cetree.import_lxml__etree()


cdef struct Frame:
    xmlNode* node  # the element at this depth
    xmlNode* outer  # the block its children's text joins; NULL: its children are not page content
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


cdef class Rules:
    """The skeleton's rules, as the walk reads them (built once by the skeleton module)."""

    cdef frozenset interactive_tags, inline_tags, not_content, heading_tags, hidden_tags
    cdef frozenset interactive_roles, alert_roles, alert_classes
    cdef bytes number_attr, hidden_attr, mark_attr
    cdef tuple reference_attrs
    cdef object hiding_style
    cdef Py_ssize_t max_blocks
    cdef str background_text
    cdef dict attribute_kinds, kept_chars, aria_flags
    cdef tuple labels
    cdef Py_ssize_t text_chars, value_chars

    def __init__(
        self, *, interactive_tags, inline_tags, not_content, heading_tags, hidden_tags,
        interactive_roles, alert_roles, alert_classes, number_attr, hidden_attr, mark_attr,
        reference_attrs, hiding_style, max_blocks, background_text,
        attribute_kinds, kept_chars, aria_flags, labels, text_chars, value_chars,
    ):
        self.interactive_tags = frozenset(interactive_tags)
        self.inline_tags = frozenset(inline_tags)
        self.not_content = frozenset(not_content)
        self.heading_tags = frozenset(heading_tags)
        self.hidden_tags = frozenset(hidden_tags)
        self.interactive_roles = frozenset(interactive_roles)
        self.alert_roles = frozenset(alert_roles)
        self.alert_classes = frozenset(alert_classes)
        self.number_attr = number_attr.encode()
        self.hidden_attr = hidden_attr.encode()
        self.mark_attr = mark_attr.encode()
        self.reference_attrs = tuple(name.encode() for name in reference_attrs)
        self.hiding_style = hiding_style
        self.max_blocks = max_blocks
        self.background_text = background_text
        self.attribute_kinds = dict(attribute_kinds)
        self.kept_chars = dict(kept_chars)
        self.aria_flags = dict(aria_flags)
        self.labels = tuple(labels)
        self.text_chars = text_chars
        self.value_chars = value_chars


cdef class Walk:
    """What the walk of one page found."""

    cdef public set hidden
    """Hidden elements inside shown message regions (the only place the skeleton asks)."""
    cdef public list tagged
    """Shown elements with an interactive tag: ``(element, key or None, descriptor)``."""
    cdef public list extra
    """Other shown elements the skeleton keeps (a role, a number, ``aria-expanded`` alone), the
    same way; a container whose ``aria-expanded`` is its only state has no text."""
    cdef public list messages
    """Shown message regions by convention, then shown elements a field names, in page order."""
    cdef public list marked
    """Shown elements with a background mark."""
    cdef public set ticking
    """Marked elements whose text changes on their own."""
    cdef public list blocks
    """The content layer: ``(is_heading, parts)`` per text block, in the order of its first text."""
    cdef public bint truncated
    """Text past the block budget was left out."""
    cdef list _referenced  # shown elements a field names: messages after the conventional ones
    cdef dict _parts  # node address -> the text parts of its block
    cdef dict _alert_class  # class value -> is it a message's (values repeat a lot on a page)
    cdef dict _tags  # name address (libxml2 interns names) -> the tag as a str
    cdef cetree._Document _doc
    cdef Rules _rules

    def __cinit__(self):
        self.hidden, self.tagged, self.extra, self.messages = set(), [], [], []
        self.marked, self.ticking, self.blocks, self.truncated = [], set(), [], False
        self._referenced, self._parts, self._alert_class, self._tags = [], {}, {}, {}

    cdef str tag(self, xmlNode* node):
        if node.ns is not NULL:
            return cetree.namespacedName(node)
        tag = self._tags.get(<size_t>node.name)
        if tag is None:
            tag = self._tags[<size_t>node.name] = cetree.namespacedName(node)
        return <str>tag

    cdef object proxy(self, xmlNode* node):
        return cetree.elementFactory(self._doc, node)

    cdef int add(self, xmlNode* owner, str text) except -1:
        """``text`` joins the block ``owner``; a new block counts against the budget."""
        if self.truncated:
            return 0
        parts = self._parts.get(<size_t>owner)
        if parts is not None:
            (<list>parts).append(text)  # whitespace too: normalising collapses it
        elif not text.isspace():
            if len(self.blocks) >= self._rules.max_blocks:
                self.truncated = True
                return 0
            parts = self._parts[<size_t>owner] = [text]
            self.blocks.append((self.is_heading(owner), parts))
        return 0

    cdef bint is_heading(self, xmlNode* node):
        if self.tag(node) in self._rules.heading_tags:
            return True
        return cetree.attributeValueFromNsName(node, NULL, <const unsigned char*>b"role") == "heading"


cdef set _references(xmlNode* top, tuple names):
    """The ids that fields name as their messages (the tokens of their ``names`` attributes)."""
    found = set()
    cdef xmlNode* node = top
    cdef xmlAttr* attr
    cdef Py_ssize_t i, count = len(names)
    while node is not NULL:
        attr = node.properties
        while attr is not NULL:
            for i in range(count):
                if _named(attr, <bytes>names[i]):
                    found.update(cetree.attributeValue(node, attr).split())
            attr = attr.next
        node = _next_element(node, top)
    return found


def walk(cetree._Element root, Rules rules):
    """Every element of ``root`` once, in document order (see ``skeleton_from_tree``)."""
    references = _references(root._c_node, rules.reference_attrs)
    result = Walk()
    result._doc = root._doc
    result._rules = rules
    cdef xmlNode* top = root._c_node
    cdef xmlNode* body = _element_from(top.children)
    while body is not NULL and not (body.ns is NULL and strcmp(<const char*>body.name, b"body") == 0):
        body = _element_from(body.next)
    if body is not NULL:
        text = cetree.textOf(body)
        if text:
            result.add(body, text)
    cdef Py_ssize_t capacity = 64, depth = 0
    cdef Frame* frames = <Frame*>malloc(capacity * sizeof(Frame))
    if frames is NULL:
        raise MemoryError()
    cdef Frame top_parent
    top_parent.node, top_parent.outer, top_parent.hidden, top_parent.in_message = NULL, NULL, False, False
    cdef xmlNode* node
    cdef Frame* grown
    try:
        frames[0] = _visit(result, rules, references, top, &top_parent, body)
        node = _element_from(top.children)
        while True:
            if node is not NULL:
                if depth + 1 >= capacity:
                    capacity *= 2
                    grown = <Frame*>realloc(frames, capacity * sizeof(Frame))
                    if grown is NULL:
                        raise MemoryError()
                    frames = grown
                frames[depth + 1] = _visit(result, rules, references, node, &frames[depth], body)
                depth += 1
                node = _element_from(node.children)
            elif depth == 0:
                break
            else:
                node = _element_from(frames[depth].node.next)
                depth -= 1
    finally:
        free(frames)
    result.messages += result._referenced
    return result


cdef Frame _visit(Walk result, Rules rules, references, xmlNode* node, Frame* parent, xmlNode* body) except *:
    cdef Frame frame
    frame.node = node
    frame.outer = NULL
    frame.in_message = parent.in_message
    tag = result.tag(node)
    cdef bint hides = tag in rules.hidden_tags
    cdef bint message = False, named = False, skip = False, tick = False
    cdef bint interactive = False, expandable = False, marked = False
    cdef xmlAttr* attr = node.properties
    cdef const char* name
    while attr is not NULL:
        if attr.ns is not NULL:
            attr = attr.next
            continue
        name = <const char*>attr.name
        if strcmp(name, b"class") == 0:
            value = cetree.attributeValue(node, attr)
            found = result._alert_class.get(value)
            if found is None:
                found = result._alert_class[value] = not rules.alert_classes.isdisjoint(value.split())
            message = message or found
        elif strcmp(name, b"style") == 0:
            value = cetree.attributeValue(node, attr)
            if ("none" in value or "hidden" in value) and rules.hiding_style.search(value):
                hides = True
        elif strcmp(name, b"id") == 0:
            named = cetree.attributeValue(node, attr) in references
        elif strcmp(name, b"role") == 0:
            value = cetree.attributeValue(node, attr)
            if value in rules.interactive_roles:
                interactive = True
            elif value in rules.alert_roles:
                message = True
        elif strcmp(name, rules.number_attr) == 0:
            interactive = True
        elif strcmp(name, b"aria-expanded") == 0:
            expandable = True
        elif strcmp(name, b"contenteditable") == 0:
            if cetree.attributeValue(node, attr) != "false":
                interactive = True
                skip = True  # its text is the descriptor's, not page content
        elif strcmp(name, b"aria-live") == 0:
            if cetree.attributeValue(node, attr) != "off":
                message = True
        elif strcmp(name, b"data-toast") == 0:
            message = True
        elif strcmp(name, rules.mark_attr) == 0:
            marked = True
            if "text" in cetree.attributeValue(node, attr).split():
                tick = True
        elif strcmp(name, b"hidden") == 0 or strcmp(name, rules.hidden_attr) == 0:
            hides = True
        elif strcmp(name, b"aria-hidden") == 0:
            if cetree.attributeValue(node, attr) == "true":
                hides = True
        attr = attr.next
    frame.hidden = hides or parent.hidden
    cdef bint shown = not frame.hidden
    element = None
    if shown:
        if tag in rules.interactive_tags:
            element = result.proxy(node)
            described = _describe(rules, node, tag, True)
            if described is not None:
                result.tagged.append((element, *described))
        elif interactive or expandable:
            element = result.proxy(node)
            described = _describe(rules, node, tag, interactive)
            if described is not None:
                result.extra.append((element, *described))
    elif parent.in_message:
        result.hidden.add(result.proxy(node))
    if marked or tick:
        if element is None:
            element = result.proxy(node)
        if marked and shown:
            result.marked.append(element)
        if tick:
            result.ticking.add(element)
    if (message or named) and shown:
        if element is None:
            element = result.proxy(node)
        if message:
            result.messages.append(element)
        if named:
            result._referenced.append(element)
        skip = True
        frame.in_message = True
    # The page text: ``body`` is the first block; text inside the rest joins its block.
    cdef xmlNode* outer = parent.outer
    if node is body:
        frame.outer = body
        return frame
    if outer is NULL:
        return frame
    if skip or hides or tag in rules.not_content:
        pass
    elif tick:
        result.add(outer if tag in rules.inline_tags else node, rules.background_text)
    else:
        frame.outer = outer if tag in rules.inline_tags else node
        text = cetree.textOf(node)
        if text:
            result.add(frame.outer, text)
    tail = cetree.tailOf(node)
    if tail:
        result.add(outer, tail)
    return frame


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
    cdef Py_ssize_t budget = 40 * limit, have = 0
    pieces = []
    cdef xmlNode* node = top.children
    while node is not NULL and have < budget:
        if node.type == tree.XML_TEXT_NODE or node.type == tree.XML_CDATA_SECTION_NODE:
            if node.content is not NULL:
                piece = cetree.pyunicode(node.content)
                pieces.append(piece)
                have += len(piece)
        elif node.type == tree.XML_ELEMENT_NODE and node.children is not NULL and not _is_script(node):
            node = node.children
            continue
        while node is not top and node.next is NULL:
            node = node.parent
        node = NULL if node is top else node.next
    return " ".join("".join(pieces)[:budget].split())[:limit]


cdef tuple _describe(Rules rules, xmlNode* node, str tag, bint interactive):
    """``(key or None, descriptor)`` of a kept element (``interactive``: False for a container kept
    for its ``aria-expanded`` alone, whose text is page content); None for ``input type=hidden``.
    One pass over the element's own attributes (usually 1-4)."""
    desc = {"tag": tag}
    key = el_id = name = label = None
    cdef Py_ssize_t label_rank = 0, rank
    cdef xmlAttr* attr = node.properties
    while attr is not NULL:
        if attr.ns is not NULL:
            attr = attr.next
            continue
        field = cetree.namespacedNameFromNsName(NULL, attr.name)
        kind = rules.attribute_kinds.get(field)
        if kind is None:
            attr = attr.next
            continue
        value = cetree.attributeValue(node, attr)
        if kind == "keep":
            value = value.strip()
            if value:
                desc[field] = value[: rules.kept_chars[field]]
        elif kind == "flag":
            desc[field] = True
        elif kind == "aria_flag":
            if value == "true":
                desc[rules.aria_flags[field]] = True
        elif kind == "key":
            key = value
        elif kind == "id":
            el_id = value
        elif kind == "name":
            name = value
        elif kind == "type":
            if tag == "input":
                desc["type"] = value.strip().lower()
        else:  # a label: the first of the most telling kind
            rank = rules.labels.index(field)
            if label is None or rank < label_rank:
                label, label_rank = value, rank
        attr = attr.next
    if tag == "input":
        if desc.setdefault("type", "text") == "hidden":
            return None
    elif tag == "select":
        _describe_select(rules, node, desc)
    else:
        text = _element_text(node, rules.text_chars)
        if text:
            desc["text"] = text
    if label is not None and "text" not in desc:
        desc["label"] = " ".join(label.split())[: rules.text_chars]
    if not interactive:
        desc.pop("text", None)  # a container's text is page content, its state is its own
    return key or el_id or name, desc


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
