# Shared by the compiled walks (included, not imported: an inline C function).


cdef inline Py_ssize_t _unicode_space(const unsigned char* c) noexcept:
    """The length of the whitespace character (``str.isspace``) at ``c`` (UTF-8), else 0."""
    if c[0] < 0x80:
        return c[0] == 0x20 or 0x09 <= c[0] <= 0x0D or 0x1C <= c[0] <= 0x1F
    if c[0] == 0xC2:
        return 2 if c[1] == 0x85 or c[1] == 0xA0 else 0  # U+0085, U+00A0
    if c[0] == 0xE1:
        return 3 if c[1] == 0x9A and c[2] == 0x80 else 0  # U+1680
    if c[0] == 0xE2 and c[1] == 0x80 and 0x80 <= c[2]:
        return 3 if c[2] <= 0x8A or c[2] == 0xA8 or c[2] == 0xA9 or c[2] == 0xAF else 0
    if c[0] == 0xE2:
        return 3 if c[1] == 0x81 and c[2] == 0x9F else 0  # U+205F
    if c[0] == 0xE3:
        return 3 if c[1] == 0x80 and c[2] == 0x80 else 0  # U+3000
    return 0
