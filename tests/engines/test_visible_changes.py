"""Visible changes a user would call "the click worked", and background noise, on real corpus pages.

One test per class of issue 11's miss list and per noise class, through the
public functions (``capture_page_state``, ``build_observation_list``). Each
page is a real page from the shared corpus (read where the benchmarks read
it, never copied), serialised once as the page an action was chosen on and
once more after one change made with lxml.
"""

from __future__ import annotations

from collections.abc import Callable

import lxml.html
import pytest

from benchmarks.verification_pairs import DEFAULT_CORPUS as CORPUS
from veriloop.engines.observation import (
    CONTENT_UPDATED_NO_SKELETON_CHANGE,
    build_observation_list,
    capture_page_state,
)
from veriloop.engines.skeleton import MAX_BLOCKS, extract_semantic_skeleton, to_utf8
from veriloop.schemas.page_contract import BACKGROUND_ATTR

URL = "https://corpus.example/page"
FORM_PAGE = "formasaurus__capitalbikeshare.com-register-457.html"
SHOP_PAGE = "formasaurus__campingworld.com-cart-447.html"
_UTF8 = lxml.html.HTMLParser(encoding="utf-8")


def corpus_root(name: str) -> lxml.html.HtmlElement:
    path = CORPUS / name
    assert path.is_file(), f"the shared page corpus is missing: no {name} in {CORPUS}"
    return lxml.html.document_fromstring(to_utf8(path.read_bytes()), parser=_UTF8)


def html(root: lxml.html.HtmlElement) -> str:
    return lxml.html.tostring(root, encoding="unicode")


def fragment(markup: str) -> lxml.html.HtmlElement:
    return lxml.html.fragment_fromstring(markup)


def observe(
    page: str,
    change: Callable[[lxml.html.HtmlElement], Callable[[], None]],
    action: str | None = None,
    *,
    unmark_after: bool = False,
):
    """The observation list for ``page`` before and after ``change``.

    ``change(root)`` may edit the page before (a widget to tick) and returns what turns it into
    the page after. ``unmark_after``: the page after carries no background marks (a client that
    marked only the page the action was chosen on).
    """
    root = corpus_root(page)
    to_after = change(root)
    before = html(root)
    to_after()
    if unmark_after:
        for el in root.iter():
            if isinstance(el.tag, str):
                el.attrib.pop(BACKGROUND_ATTR, None)
    return build_observation_list(capture_page_state(URL, before), html(root), URL, action=action)


def body(root):
    return root.find("body")


def first_input(root):
    return next(el for el in root.iter("input") if (el.get("type") or "text") == "text")


# --- the miss list ---------------------------------------------------------------------------


def test_a_heading_that_changes_is_a_change():
    def change(root):
        heading = next(
            h
            for h in root.iter("h1", "h2")
            if h.text_content().strip()
            and not any(a.tag == "a" for a in h.iterancestors())
            and h.find(".//a") is None
        )
        old = " ".join(heading.text_content().split())

        def after():
            heading[:] = []
            heading.text = "Order confirmed: thank you!"

        change.old = old
        return after

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    assert f"Heading changed from '{change.old}' to 'Order confirmed: thank you!'" in (
        result.observations
    )


def test_a_list_gaining_a_plain_text_row_is_a_change():
    def change(root):
        lists = [ul for ul in root.iter("ul") if ul.find("li") is not None]
        return lambda: lists[-1].append(fragment("<li>Jas Smith, born 1990</li>"))

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    assert "New text appeared: 'Jas Smith, born 1990'" in result.observations


def test_a_table_gaining_a_plain_text_row_is_a_change():
    def change(root):
        table = next(root.iter("table"))
        row = "<tr><td>Jas Smith</td><td>42</td><td>London</td></tr>"
        return lambda: table.append(fragment(row))

    result = observe(SHOP_PAGE, change)
    assert result.meaningful_content_change is True
    assert "New text appeared: 'Jas Smith 42 London'" in result.observations


@pytest.mark.parametrize(
    ("tag", "convention"),
    [
        ("div", "invalid-feedback"),  # Bootstrap 4/5
        ("span", "text-danger"),
        ("span", "help-block"),  # Bootstrap 3
        ("ul", "errorlist"),  # Django
        ("span", "field-validation-error"),  # ASP.NET
        ("p", "error-message"),
    ],
)
def test_inline_validation_messages_by_convention(tag, convention):
    text = "Enter a valid email address"
    inner = f"<li>{text}</li>" if tag == "ul" else text

    def change(root):
        field = first_input(root)
        return lambda: field.addnext(fragment(f'<{tag} class="{convention}">{inner}</{tag}>'))

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    assert "New message/alert appeared: 'Enter a valid email address'" in result.observations


def test_aria_invalid_on_the_field_is_a_change():
    def change(root):
        field = first_input(root)
        change.key = field.get("id") or field.get("name")
        return lambda: field.set("aria-invalid", "true")

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    assert f"Element '{change.key}' changed 'aria-invalid' from '' to 'true'" in result.observations


@pytest.mark.parametrize("reference", ["aria-describedby", "aria-errormessage"])
def test_a_message_the_field_references_is_a_message(reference):
    def change(root):
        field = first_input(root)
        field.set(reference, "email-error")
        message = fragment('<div id="email-error"></div>')
        field.addnext(message)
        return lambda: setattr(message, "text", "This address is already registered")

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    assert "New message/alert appeared: 'This address is already registered'" in (
        result.observations
    )


@pytest.mark.parametrize("region", ['aria-live="polite"', 'role="status"', 'class="alert"'])
def test_a_new_message_in_a_long_region_is_seen_whole_and_not_glued(region):
    old = "Welcome back! " + "Your last order shipped on Monday and will arrive soon. " * 5

    def change(root):
        box = fragment(f"<div {region}><div>{old}</div></div>")
        body(root).insert(0, box)
        return lambda: box.append(fragment("<div>Payment failed</div>"))

    result = observe(SHOP_PAGE, change)
    assert len(old) > 200
    assert result.meaningful_content_change is True
    assert "New message/alert appeared: 'Payment failed'" in result.observations
    assert not any("!Payment" in line or "soon.Payment" in line for line in result.observations)


@pytest.mark.parametrize(
    "hiding", ['style="display:none"', "hidden", 'data-veriloop-hidden="1"', 'aria-hidden="true"']
)
def test_a_message_box_that_becomes_visible_is_a_change(hiding):
    def change(root):
        box = fragment(
            f'<div class="notice-panel" {hiding}><p>Thanks, we got your request</p></div>'
        )
        first_input(root).addnext(box)
        name = hiding.split("=")[0]
        return lambda: box.attrib.pop(name)

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    assert "New text appeared: 'Thanks, we got your request'" in result.observations


def test_aria_expanded_on_a_non_interactive_container_is_a_change():
    def change(root):
        menu = fragment(
            '<ul class="collapse" aria-expanded="false"><li>Bikes</li><li>Docks</li></ul>'
        )
        body(root).append(menu)
        return lambda: menu.set("aria-expanded", "true")

    result = observe(FORM_PAGE, change)
    assert result.meaningful_content_change is True
    (line,) = [line for line in result.observations if "aria-expanded" in line]
    assert line.endswith("changed 'aria-expanded' from 'false' to 'true'")


def test_a_cart_counter_in_a_link_is_a_change_even_though_only_digits_moved():
    def change(root):
        cart = fragment('<a href="/cart" id="cart">Cart (1)</a>')
        body(root).insert(0, cart)
        return lambda: setattr(cart, "text", "Cart (2)")

    result = observe(SHOP_PAGE, change, action="click(3)")
    assert result.meaningful_content_change is True
    assert "Element 'cart' changed 'text' from 'Cart (1)' to 'Cart (2)'" in result.observations


# --- background noise ----------------------------------------------------------------------


def test_an_unmarked_ticker_is_not_a_change():
    def change(root):
        clock = fragment("<p>Server time 12:00:01, 4 visitors online</p>")
        body(root).insert(0, clock)
        return lambda: setattr(clock, "text", "Server time 12:00:02, 5 visitors online")

    result = observe(SHOP_PAGE, change)
    assert result.meaningful_content_change is False
    assert result.observations[1] == CONTENT_UPDATED_NO_SKELETON_CHANGE


def test_a_marked_rotating_widget_is_not_a_change_even_unmarked_after():
    def change(root):
        widget = fragment(f'<p {BACKGROUND_ATTR}="text">Now playing: Blue in Green</p>')
        body(root).insert(0, widget)
        return lambda: setattr(widget, "text", "Now playing: So What")

    result = observe(SHOP_PAGE, change, unmark_after=True)
    assert result.meaningful_content_change is False


def test_a_relative_time_ticking_inside_a_link_is_not_a_change_unless_clicked():
    def change(root):
        post = fragment(
            '<div><a href="/posts/7" data-veriloop-id="7">Trail report '
            f'<time {BACKGROUND_ATTR}="text">27 days ago</time></a></div>'
        )
        body(root).insert(0, post)
        stamp = post.find(".//time")
        return lambda: setattr(stamp, "text", "28 days ago")

    assert observe(SHOP_PAGE, change, unmark_after=True).meaningful_content_change is False
    clicked = observe(SHOP_PAGE, change, action="click(7)", unmark_after=True)
    assert clicked.meaningful_content_change is True
    assert (
        "Element '7' changed 'text' from 'Trail report 27 days ago' to 'Trail report 28 days ago'"
        in clicked.observations
    )


def test_a_rotating_ad_link_is_not_a_change():
    def change(root):
        ad = fragment(
            f'<div><a href="https://ads.example/1" {BACKGROUND_ATTR}="href">'
            f'<img src="https://ads.example/1.png" alt="Ad" {BACKGROUND_ATTR}="src"></a></div>'
        )
        body(root).insert(0, ad)
        link, image = ad.find("a"), ad.find(".//img")

        def after():
            link.set("href", "https://ads.example/2")
            image.set("src", "https://ads.example/2.png")

        return after

    assert observe(SHOP_PAGE, change, unmark_after=True).meaningful_content_change is False


@pytest.mark.parametrize(
    "noise",
    [
        (
            "token",
            '<form><input type="hidden" name="csrf" value="a1"></form>',
            "input",
            "value",
            "b2",
        ),
        ("script", "<script>var seen = 1;</script>", None, "text", "var seen = 2; track();"),
        ("style", "<style>.a { color: red }</style>", None, "text", ".a { color: blue }"),
        ("attribute", '<div data-impression="1">Hello</div>', None, "data-impression", "2"),
    ],
    ids=lambda noise: noise[0] if isinstance(noise, tuple) else None,
)
def test_tokens_scripts_styles_and_tracking_attributes_are_not_changes(noise):
    _, markup, inner, field, value = noise

    def change(root):
        el = fragment(markup)
        body(root).append(el)
        target = el.find(f".//{inner}") if inner else el
        if field == "text":
            return lambda: setattr(target, "text", value)
        return lambda: target.set(field, value)

    assert observe(SHOP_PAGE, change).meaningful_content_change is False


def test_whitespace_is_not_a_change():
    def change(root):
        paragraph = next(el for el in root.iter("p") if el.text and el.text.strip())
        return lambda: setattr(paragraph, "text", "\n   " + paragraph.text + "  \t")

    assert observe(FORM_PAGE, change).meaningful_content_change is False


# --- budget --------------------------------------------------------------------------------


def test_the_content_layer_is_budgeted_and_says_so():
    blocks = "".join(
        f"<p>Paragraph number {n} of a very long page</p>" for n in range(MAX_BLOCKS + 500)
    )
    content = extract_semantic_skeleton(f"<html><body>{blocks}</body></html>")["content"]
    assert len(content["texts"]) == MAX_BLOCKS
    assert content["truncated"] is True
    assert all(len(text) <= 120 for text in content["texts"])


def test_a_ticker_marked_only_in_the_page_after_is_not_a_change():
    # The script marks an element once it changes while no action is pending: the page an action
    # was chosen on may predate the mark.
    def change(root):
        timer = fragment("<p>Time left: <span>120 / 120sec</span></p>")
        body(root).insert(0, timer)
        span = timer.find("span")

        def after():
            span.text = "119 / 120sec, hurry"
            span.set(BACKGROUND_ATTR, "text")

        return after

    assert observe(SHOP_PAGE, change).meaningful_content_change is False


def test_background_text_in_a_message_marked_on_one_side_only_is_not_a_change():
    # A message region with a relative time the script marked only once it ticked.
    def change(root, message="Order saved."):
        region = fragment('<div role="status">Order saved. <span>Updated 5 min ago</span></div>')
        body(root).insert(0, region)
        stamp = region.find("span")

        def after():
            region.text = message + " "
            stamp.text = "Updated 6 min ago, syncing"
            stamp.set(BACKGROUND_ATTR, "text")

        return after

    assert observe(SHOP_PAGE, change).meaningful_content_change is False
    failed = observe(SHOP_PAGE, lambda root: change(root, "Payment failed."))
    assert failed.meaningful_content_change is True
    assert "New message/alert appeared: 'Payment failed. ⟨…⟩'" in failed.observations
