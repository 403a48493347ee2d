"""Skeleton extraction and diff: keys, descriptors, hidden elements, messages, charsets, granular lines."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veriloop.engines.skeleton import (
    SkeletonError,
    _changed_blocks,
    diff_skeletons,
    empty_skeleton,
    extract_semantic_skeleton,
    sniff_encoding,
    to_utf8,
)
from veriloop.schemas.page_contract import ELEMENT_ID_ATTR, HIDDEN_ATTR


def elements(html: str | bytes) -> dict:
    return extract_semantic_skeleton(html)["elements"]


def alerts(html: str | bytes) -> list[str]:
    return list(extract_semantic_skeleton(html)["alerts"].values())


# --- keys ---------------------------------------------------------------------------------


def test_key_prefers_client_element_id_then_id_then_name_then_tag_index():
    html = f"""<body>
      <button {ELEMENT_ID_ATTR}="169" id="b1" name="n1">A</button>
      <button id="b2" name="n2">B</button>
      <button name="n3">C</button>
      <button>D</button><button>E</button>
    </body>"""
    assert list(elements(html)) == ["169", "b2", "n3", "button[0]", "button[1]"]


def test_duplicate_keys_get_distinct_suffixes():
    html = '<input type="radio" name="color" value="r"><input type="radio" name="color" value="g">'
    assert list(elements(html)) == ["color", "color[2]"]


# --- which elements -----------------------------------------------------------------------


def test_interactive_roles_and_contenteditable_are_included():
    html = """<body>
      <div role="button" id="r1">Go</div><span role="link" id="r2">More</span>
      <li role="menuitem" id="r3">Open</li><div role="checkbox" aria-checked="true" id="r4">Agree</div>
      <div role="tab" aria-selected="true" id="r5">Tab</div><div role="switch" id="r6">Dark</div>
      <div role="combobox" aria-expanded="false" id="r7">Pick</div><div role="option" id="r8">One</div>
      <div role="radio" id="r9">Yes</div>
      <div contenteditable="true" id="ed">Draft text</div>
      <div role="presentation" id="no1">x</div><div contenteditable="false" id="no2">y</div>
    </body>"""
    got = elements(html)
    assert set(got) == {"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "ed"}
    assert got["r4"]["checked"] is True
    assert got["r5"]["aria-selected"] == "true"
    assert got["r7"]["aria-expanded"] == "false"
    assert got["ed"]["text"] == "Draft text"


def test_elements_the_snapshot_numbered_are_interactive_whatever_their_tag():
    # The snapshot script numbers what the page made clickable (a pointer-cursor div, MiniWoB's reward area).
    html = f"""<body>
      <div {ELEMENT_ID_ATTR}="7" id="cover">Reward: 0</div>
      <span {ELEMENT_ID_ATTR}="8" role="button" contenteditable="true">Once</span>
      <button {ELEMENT_ID_ATTR}="9">Submit</button>
      <div id="plain">Not numbered</div>
      <div {ELEMENT_ID_ATTR}="10" {HIDDEN_ATTR}="1">Hidden</div>
    </body>"""
    got = elements(html)
    assert list(got) == ["9", "7", "8"]  # one entry each, however many reasons it has
    assert got["7"] == {"tag": "div", "text": "Reward: 0"}


def test_a_page_without_numbered_elements_keeps_only_semantic_elements():
    html = '<body><div id="cover" style="cursor:pointer">Reward: 0</div><a href="/x" id="l">Go</a></body>'
    assert list(elements(html)) == ["l"]


@pytest.mark.parametrize(
    "hidden",
    [
        '<div hidden><button id="x">X</button></div>',
        '<div aria-hidden="true"><span><button id="x">X</button></span></div>',
        f'<div {HIDDEN_ATTR}="1"><button id="x">X</button></div>',
        f'<button id="x" {HIDDEN_ATTR}="1">X</button>',
        '<button id="x" hidden>X</button>',
        '<input type="hidden" id="x" value="csrf">',
        '<input type="HIDDEN" id="x" value="csrf">',
        '<noscript><a id="x" href="/nojs">X</a></noscript>',
        '<template><button id="x">X</button></template>',
    ],
)
def test_hidden_elements_are_left_out(hidden):
    got = elements(f'<body>{hidden}<button id="shown">S</button></body>')
    assert list(got) == ["shown"]


def test_aria_hidden_false_does_not_hide():
    assert "x" in elements('<div aria-hidden="false"><button id="x">X</button></div>')


# --- descriptors --------------------------------------------------------------------------


def test_descriptor_fields():
    html = """<body>
      <a id="home" href=" /home " role="link">  Home
         page  </a>
      <input id="email" type="email" value="a@b.c" disabled>
      <input id="agree" type="checkbox" checked>
      <button id="menu" aria-expanded="true">Menu</button>
      <button id="icon" aria-label="Close dialog"><svg></svg></button>
      <select id="colour"><option value="r">Red</option><option value="b" selected>Blue</option></select>
      <textarea id="note">Hello</textarea>
    </body>"""
    got = elements(html)
    assert got["home"] == {"tag": "a", "href": "/home", "role": "link", "text": "Home page"}
    assert got["email"] == {"tag": "input", "type": "email", "value": "a@b.c", "disabled": True}
    assert got["agree"] == {"tag": "input", "type": "checkbox", "checked": True}
    assert got["menu"]["aria-expanded"] == "true"
    assert got["icon"]["label"] == "Close dialog"
    assert got["colour"] == {"tag": "select", "text": "Blue", "value": "b"}
    assert got["note"]["text"] == "Hello"


def test_text_is_trimmed_to_50_characters():
    got = elements(f"<button id='b'>{'word ' * 40}</button>")
    assert len(got["b"]["text"]) == 50
    assert got["b"]["text"].startswith("word word")


def test_select_without_selected_option_shows_the_first():
    got = elements(
        '<select id="s"><option value="1">One</option><option value="2">Two</option></select>'
    )
    assert got["s"] == {"tag": "select", "text": "One", "value": "1"}


# --- messages -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        '<div role="alert">{}</div>',
        '<p role="status">{}</p>',
        '<div aria-live="polite">{}</div>',
        '<div class="toast fade">{}</div>',
        '<span class="error">{}</span>',
        '<div class="msg success">{}</div>',
        '<div class="alert alert-danger">{}</div>',
        "<div data-toast>{}</div>",
    ],
)
def test_messages_are_found(message):
    assert alerts("<body>" + message.format("  Patient   saved ") + "</body>") == ["Patient saved"]


@pytest.mark.parametrize(
    "not_message",
    [
        '<div aria-live="off">{}</div>',
        '<div class="alert-danger">{}</div>',  # the class token must match exactly
        '<div class="errors-list">{}</div>',
        '<div role="alert" hidden>{}</div>',
        '<div role="alert"></div>{}',
    ],
)
def test_not_messages(not_message):
    assert alerts("<body>" + not_message.format("Patient saved") + "</body>") == []


def test_a_message_nested_in_a_message_counts_once():
    html = '<div role="alert"><div class="alert">Saved</div></div><div class="error">Bad</div>'
    assert alerts(html) == ["Saved", "Bad"]


# --- robustness ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "html", ["", "   ", "<!-- only a comment -->", None, b"", b"\x00\x00", "</div></p>"]
)
def test_empty_and_degenerate_input_gives_an_empty_skeleton(html):
    assert extract_semantic_skeleton(html) == empty_skeleton()


def test_stray_angle_brackets_are_page_text():
    assert extract_semantic_skeleton("<<<>>>") == {
        **empty_skeleton(),
        "content": {"headings": [], "texts": ["<<<>>>"], "truncated": False},
    }


def test_malformed_html_is_recovered():
    got = elements("<div><button id=a>One<button id=b>Two</div><a href=x id=c>Three")
    assert set(got) == {"a", "b", "c"}


def test_legacy_charset_declared_in_meta_is_decoded_from_bytes():
    html = '<html><head><meta charset="windows-1251"></head><body><button id="b">Сохранить</button></body></html>'
    assert elements(html.encode("cp1251"))["b"]["text"] == "Сохранить"


def test_http_equiv_charset_is_decoded_from_bytes():
    html = (
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=koi8-r"></head>'
        '<body><a id="a" href="/">Привет</a></body></html>'
    )
    assert elements(html.encode("koi8-r"))["a"]["text"] == "Привет"


def test_text_input_is_not_redecoded_by_its_meta_charset():
    # outerHTML of a page that was served as windows-1251 still says so; the text is already decoded.
    html = '<html><head><meta charset="windows-1251"></head><body><button id="b">Сохранить</button></body></html>'
    assert elements(html)["b"]["text"] == "Сохранить"


def test_xml_declaration_in_text_input_does_not_raise():
    html = (
        '<?xml version="1.0" encoding="utf-8"?><html><body><button id="b">Ok</button></body></html>'
    )
    assert elements(html)["b"]["text"] == "Ok"


def test_undeclared_non_utf8_bytes_fall_back_to_windows_1252():
    html = '<body><button id="b">Caf\u00e9</button></body>'.encode("cp1252")
    assert elements(html)["b"]["text"] == "Caf\u00e9"


def test_encoding_sniffing():
    assert (
        sniff_encoding(b'<meta charset="iso-8859-1">') == "cp1252"
    )  # WHATWG: latin-1 means windows-1252
    assert sniff_encoding(b'<meta charset="utf-16">') == "utf-8"
    assert sniff_encoding(b'<meta charset="no-such-charset">') == "utf-8"
    assert sniff_encoding("\ufeff<p>".encode("utf-16-le")) == "utf-16"
    assert to_utf8("\ud800x") == b"?x"  # a lone surrogate cannot be encoded; it is replaced


def test_multi_megabyte_page():
    links = "".join(
        f'<li><a href="/p/{i}" id="l{i}">Product number {i}</a></li>' for i in range(40_000)
    )
    html = f"<html><body><ul>{links}</ul><div role='alert'>Loaded</div></body></html>"
    assert len(html) > 2_000_000
    skeleton = extract_semantic_skeleton(html)
    assert len(skeleton["elements"]) == 40_000
    assert skeleton["elements"]["l39999"]["text"] == "Product number 39999"
    assert list(skeleton["alerts"].values()) == ["Loaded"]


def test_deeply_nested_page():
    # Browsers flatten past 512 levels; libxml2 (huge_tree) reads 2048 and stops cleanly beyond.
    nested = "<div>" * 1500 + '<button id="deep">Deep</button>' + "</div>" * 1500
    assert "deep" in elements(nested)
    absurd = "<div>" * 5000 + '<button id="deeper">Deep</button>' + "</div>" * 5000
    assert isinstance(elements(absurd), dict)


# --- diff ---------------------------------------------------------------------------------


def test_button_text_change_is_a_granular_line(page):
    before, after = (
        extract_semantic_skeleton(page()),
        extract_semantic_skeleton(page(button="Saved")),
    )
    assert diff_skeletons(before, after) == ["Element '14' changed 'text' from 'Save' to 'Saved'"]


def test_toast_is_an_alert_line(page):
    before, after = (
        extract_semantic_skeleton(page()),
        extract_semantic_skeleton(page(alert="Patient saved")),
    )
    assert diff_skeletons(before, after) == ["New message/alert appeared: 'Patient saved'"]
    assert diff_skeletons(after, before) == ["Message/alert disappeared: 'Patient saved'"]


def test_typed_value_and_checked_box_are_lines(page):
    before = extract_semantic_skeleton(page())
    after = extract_semantic_skeleton(page(value="Jas", checked=True))
    assert diff_skeletons(before, after) == [
        "Element '12' changed 'value' from '' to 'Jas'",
        "Element '13' changed 'checked' from false to true",
    ]


def test_appeared_and_disappeared_elements():
    before = extract_semantic_skeleton('<button id="new">New Patient</button>')
    after = extract_semantic_skeleton(
        '<input id="name" placeholder="Name"><button id="save">Save</button>'
    )
    assert diff_skeletons(before, after) == [
        "New element appeared: 'name' (input type=text 'Name')",
        "New element appeared: 'save' (button 'Save')",
        "Element disappeared: 'new' (button 'New Patient')",
    ]


def test_diff_order_is_stable_messages_then_changes_then_new_then_gone():
    before = extract_semantic_skeleton('<button id="a">A</button><button id="gone">G</button>')
    after = extract_semantic_skeleton(
        '<div role="alert">Done</div><button id="a">A2</button><button id="fresh">F</button>'
    )
    expected = [
        "New message/alert appeared: 'Done'",
        "Element 'a' changed 'text' from 'A' to 'A2'",
        "New element appeared: 'fresh' (button 'F')",
        "Element disappeared: 'gone' (button 'G')",
    ]
    assert diff_skeletons(before, after) == expected
    assert diff_skeletons(dict(before), dict(after)) == expected


def test_page_rebuild_is_capped_with_a_summary_line():
    before = extract_semantic_skeleton(
        "".join(f"<a id='o{i}' href='/o'>Old {i}</a>" for i in range(30))
    )
    after = extract_semantic_skeleton(
        "".join(f"<a id='n{i}' href='/n'>New {i}</a>" for i in range(30))
    )
    lines = diff_skeletons(before, after)
    assert len(lines) == 41
    assert lines[-1] == "... and 20 more changes"
    assert diff_skeletons(before, after, limit=5)[-1] == "... and 55 more changes"


def test_alerts_compare_as_texts_not_positions():
    before = extract_semantic_skeleton('<div role="alert">B</div>')
    after = extract_semantic_skeleton('<div role="alert">A</div><div role="alert">B</div>')
    assert diff_skeletons(before, after) == ["New message/alert appeared: 'A'"]


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"elements": {}},
        {"elements": [], "alerts": {}},
        {"elements": {"x": "text"}, "alerts": {}},
    ],
)
def test_malformed_skeleton_raises_a_clear_error(bad):
    with pytest.raises(SkeletonError):
        diff_skeletons(bad, empty_skeleton())


def test_a_mostly_changed_descriptor_still_diffs_per_field():
    before = {"elements": {"f": {"tag": "input", "type": "text"}}, "alerts": {}}
    after = {
        "elements": {
            "f": {
                "tag": "input",
                "type": "email",
                "value": "a@b.c",
                "disabled": True,
                "label": "Mail",
            }
        },
        "alerts": {},
    }
    assert diff_skeletons(before, after) == [
        "Element 'f' changed 'type' from 'text' to 'email'",
        "Element 'f' changed 'label' from '' to 'Mail'",
        "Element 'f' changed 'value' from '' to 'a@b.c'",
        "Element 'f' changed 'disabled' from false to true",
    ]


def test_aria_expanded_keeps_a_buttons_text_and_gives_a_container_only_its_state():
    got = extract_semantic_skeleton(
        '<button id="toggle" aria-expanded="false">Menu</button>'
        '<ul id="menu" aria-expanded="false"><li>Home</li></ul>'
    )["elements"]
    assert got["toggle"] == {"tag": "button", "text": "Menu", "aria-expanded": "false"}
    assert got["menu"] == {"tag": "ul", "aria-expanded": "false"}


def test_a_deeply_nested_page_is_walked_to_its_leaves_and_back():
    # Deeper than the walk's first stack of frames: it grows, and the way back up finds every sibling.
    depth = 1000
    html = (
        "<html><body>"
        + "<div>" * depth
        + '<h2>Deep heading</h2><button id="deep">Deep</button>'
        + '<div style="display:none"><button id="gone">Gone</button><p>hidden text</p></div>'
        + "</div>" * depth
        + '<p>After the nest</p><button id="after">After</button></body></html>'
    )
    skeleton = extract_semantic_skeleton(html)
    assert list(skeleton["elements"]) == ["deep", "after"]
    assert skeleton["content"]["headings"] == ["Deep heading"]
    assert skeleton["content"]["texts"] == ["After the nest"]


def _multiset_changes(before: list[str], after: list[str]) -> tuple[list[str], list[str]]:
    """The definition: blocks one list has more of than the other, the first ones in page order."""

    def first(texts: list[str], wanted: Counter) -> list[str]:
        picked = []
        for text in texts:
            if wanted[text] > 0:
                wanted[text] -= 1
                picked.append(text)
        return picked

    b, a = Counter(before), Counter(after)
    return first(before, b - a), first(after, a - b)


_BLOCKS = st.lists(st.sampled_from(["home", "news", "sport", "about", "a", ""]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(_BLOCKS, st.lists(st.tuples(st.integers(0, 60), _BLOCKS), max_size=4), st.booleans())
def test_changed_page_text_is_the_multiset_difference_in_page_order(page, edits, swap):
    """Blocks both lists start and end with are left out of the counting and the few changed
    ones are searched for: the result is still the definition's, whatever the edits."""
    after = list(page)
    for at, blocks in edits:
        after[at : at + len(blocks) // 2] = blocks
    before, after = (after, page) if swap else (page, after)
    assert _changed_blocks(before, after) == _multiset_changes(before, after)
