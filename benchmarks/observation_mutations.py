"""Model-free benchmark: does the engine see every visible change, and stay silent on background noise?

Several thousand programmatic changes over the real-page corpus. Each corpus
page is decoded, parsed and serialised as the page an action was chosen on;
each mutation class picks a random place in it (seeded) and produces the page
after. Visible classes (the truth is "meaningful"): a heading's text, a plain
list row or table row, inline validation messages under the usual
conventions and ARIA relationships, a message added to a long live region, a
message box that stops being hidden, ``aria-expanded`` on a container, an
edited or added paragraph, a counter in a link, a button's text, a typed
value. Noise classes (the truth is "not meaningful"): an unmarked digit
ticker (old client), and, marked in the page *before* only with
``data-veriloop-background`` as the snapshot script would have, a rotating
quote, a relative time inside a link, a rotating ad (href and src); a
rotating token in a hidden input, whitespace, scripts, styles, comments,
tracking attributes.

Scored: ``build_observation_list(...).meaningful_content_change`` against the
truth, per class and overall.

    python -m benchmarks.observation_mutations [CORPUS] [--per-class 2] [--seed 0]

Last line: ``RESULT precision=... recall=... transitions=...``.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import lxml.html
import typer

from benchmarks.verification_pairs import DEFAULT_CORPUS, PAGE_URL
from veriloop.engines.observation import build_observation_list, capture_page_state
from veriloop.engines.skeleton import to_utf8
from veriloop.schemas.page_contract import BACKGROUND_ATTR

_UTF8 = lxml.html.HTMLParser(encoding="utf-8")
WORDS = (
    "order confirmed thank you payment failed saved your changes profile updated message sent "
    "please enter a valid email address password too short shipping address required item added "
    "welcome back session expired invoice ready booking reference appointment scheduled"
).split()
NOT_SHOWN = {"noscript", "template", "head", "script", "style", "title", "select", "option"}


def phrase(rng: random.Random, words: int = 5) -> str:
    """A sentence no page is likely to hold already."""
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + f" {rng.choice('!.?')}"


def shown(el: lxml.html.HtmlElement) -> bool:
    """Rendered, as far as the markup says (hidden attributes, inline display:none, aria-hidden)."""
    for node in (el, *el.iterancestors()):
        if not isinstance(node.tag, str) or node.tag in NOT_SHOWN:
            return False
        if node.get("hidden") is not None or node.get("aria-hidden") == "true":
            return False
        style = (node.get("style") or "").replace(" ", "").lower()
        if "display:none" in style or "visibility:hidden" in style:
            return False
    return True


def pick(rng: random.Random, root, tags: tuple[str, ...], accept=lambda el: True):
    candidates = [el for el in root.iter(*tags) if accept(el) and shown(el)]
    return rng.choice(candidates) if candidates else None


def _text(el) -> str:
    return " ".join(el.text_content().split())


def _no_link(el) -> bool:
    return not any(a.tag in ("a", "button") for a in (el, *el.iterancestors()))


def spot(rng: random.Random, root):
    """A visible container to put something new in."""
    return pick(rng, root, ("div", "section", "main", "article", "body"), _no_link)


def insert(rng: random.Random, root, html: str):
    container = spot(rng, root)
    el = lxml.html.fragment_fromstring(html)
    container.insert(rng.randint(0, len(container)), el)
    return el


# A mutation: (root of the page before, rng) -> a function that turns that root into the page after,
# or None when the page has no place for it. Setup may change the page before (a widget to tick).
Mutation = Callable[[lxml.html.HtmlElement, random.Random], Callable[[], None] | None]


# --- visible changes --------------------------------------------------------------------------


def _retext(tags: tuple[str, ...], accept, words: int) -> Mutation:
    """A mutation giving a visible element of ``tags`` a new text of ``words`` words."""

    def mutation(root, rng):
        el = pick(rng, root, tags, accept)
        if el is None:
            return None

        def after():
            el[:] = []
            el.text = phrase(rng, words)

        return after

    return mutation


heading_text = _retext(("h1", "h2", "h3"), _text, 5)
paragraph_edit = _retext(("p",), lambda el: _no_link(el) and len(_text(el)) > 3, 8)
button_text = _retext(("button",), _text, 2)


def list_row(root, rng):
    lst = pick(rng, root, ("ul", "ol"), lambda el: _no_link(el) and len(el.findall("li")) > 0)
    if lst is None:
        return None
    return lambda: lst.append(lxml.html.fragment_fromstring(f"<li>{phrase(rng)}</li>"))


def table_row(root, rng):
    def has_rows(el):
        return _no_link(el) and el.find(".//tr") is not None

    table = pick(rng, root, ("table",), has_rows)
    if table is None:
        return None
    body = table.find("tbody") if table.find("tbody") is not None else table
    cells = "".join(f"<td>{rng.choice(WORDS)} {rng.randint(1, 99)}</td>" for _ in range(3))
    return lambda: body.append(lxml.html.fragment_fromstring(f"<tr>{cells}</tr>"))


VALIDATION = (
    '<div class="invalid-feedback">{}</div>',
    '<span class="text-danger">{}</span>',
    '<span class="help-block">{}</span>',
    '<ul class="errorlist"><li>{}</li></ul>',
    '<span class="field-validation-error">{}</span>',
    '<div class="error-message">{}</div>',
)


def _field(root, rng):
    def text_input(el):
        return (el.get("type") or "text").lower() in ("text", "email", "password", "search", "tel")

    return pick(rng, root, ("input",), text_input)


def validation_class(root, rng):
    field = _field(root, rng)
    if field is None:
        return None
    template = rng.choice(VALIDATION)

    def after():
        message = lxml.html.fragment_fromstring(template.format(phrase(rng)))
        field.addnext(message)

    return after


def validation_aria(root, rng):
    """The field points at an empty message (aria-describedby / aria-errormessage), then it fills."""
    field = _field(root, rng)
    if field is None:
        return None
    ref = f"err-{rng.randint(0, 10**6)}"
    field.set(rng.choice(("aria-describedby", "aria-errormessage")), ref)
    message = lxml.html.fragment_fromstring(f'<div id="{ref}"></div>')
    field.addnext(message)

    def after():
        message.text = phrase(rng)
        field.set("aria-invalid", "true")

    return after


def aria_invalid(root, rng):
    field = _field(root, rng)
    if field is None:
        return None
    return lambda: field.set("aria-invalid", "true")


def live_region_message(root, rng):
    """A live region or alert container already holding more than 200 characters gains a message."""
    kind = rng.choice(('aria-live="polite"', 'role="status"', 'role="log"', 'class="alert"'))
    old = " ".join(phrase(rng, 8) for _ in range(5))
    region = insert(rng, root, f"<div {kind}><div>{old}</div></div>")
    return lambda: region.append(lxml.html.fragment_fromstring(f"<div>{phrase(rng)}</div>"))


def message_box_shown(root, rng):
    hiding = rng.choice(('style="display:none"', "hidden", 'style="visibility: hidden"'))
    box = insert(rng, root, f'<div class="notice-box" {hiding}><p>{phrase(rng)}</p></div>')

    def after():
        box.attrib.pop("style", None)
        box.attrib.pop("hidden", None)

    return after


def expanded_container(root, rng):
    items = "".join(f"<li>{rng.choice(WORDS)}</li>" for _ in range(3))
    menu = insert(rng, root, f'<ul class="collapse" aria-expanded="false">{items}</ul>')
    return lambda: menu.set("aria-expanded", "true")


def text_added(root, rng):
    container = spot(rng, root)
    tag = rng.choice(("p", "div", "span"))
    position = rng.randint(0, len(container))
    return lambda: container.insert(
        position, lxml.html.fragment_fromstring(f"<{tag}>{phrase(rng)}</{tag}>")
    )


def link_counter(root, rng):
    """Cart (1) -> Cart (2) after "Add to cart": digits only, but in a link and not background."""
    n = rng.randint(0, 8)
    link = insert(rng, root, f'<div><a href="/cart">Cart ({n})</a></div>').find("a")
    return lambda: setattr(link, "text", f"Cart ({n + 1})")


def typed_value(root, rng):
    field = _field(root, rng)
    if field is None:
        return None
    return lambda: field.set("value", phrase(rng, 2))


# --- background noise -------------------------------------------------------------------------


def ticker_unmarked(root, rng):
    """An old client: a clock ticking in plain text, no mark."""
    clock = insert(rng, root, f"<div><span>Server time 12:{rng.randint(10, 58)}:07</span></div>")
    span = clock.find("span")
    return lambda: setattr(span, "text", span.text.replace(":07", ":08"))


def rotating_text_marked(root, rng):
    widget = insert(
        rng, root, f'<div><span {BACKGROUND_ATTR}="text">Now playing: {phrase(rng, 3)}</span></div>'
    )
    span = widget.find("span")
    return lambda: setattr(span, "text", f"Now playing: {phrase(rng, 3)}")


def relative_time_marked(root, rng):
    days = rng.randint(2, 60)
    post = insert(
        rng,
        root,
        f'<div><a href="/posts/{days}">{phrase(rng, 4)} '
        f'<time {BACKGROUND_ATTR}="text">{days} days ago</time></a></div>',
    )
    stamp = post.find(".//time")
    return lambda: setattr(stamp, "text", f"{days + 1} days ago")


def rotating_ad_marked(root, rng):
    n = rng.randint(1, 10**6)
    ad = insert(
        rng,
        root,
        f'<div><a href="https://ads.example/{n}" {BACKGROUND_ATTR}="href">'
        f'<img src="https://ads.example/{n}.png" alt="Sponsored" {BACKGROUND_ATTR}="src"></a></div>',
    )
    link, image = ad.find("a"), ad.find(".//img")

    def after():
        link.set("href", f"https://ads.example/{n + 1}")
        image.set("src", f"https://ads.example/{n + 1}.png")

    return after


def token(root, rng):
    form = insert(
        rng, root, f'<form><input type="hidden" name="csrf" value="{rng.random()}"></form>'
    )
    field = form.find("input")
    return lambda: field.set("value", str(rng.random()))


def whitespace(root, rng):
    el = pick(rng, root, ("div", "p", "li", "span"))
    if el is None:
        return None

    def after():
        el.text = "\n   " + (el.text or "") + "  \t"

    return after


def script(root, rng):
    tag = lxml.html.fragment_fromstring(f"<script>var seen = {rng.randint(0, 99)};</script>")
    spot(rng, root).append(tag)
    return lambda: setattr(
        tag, "text", f"var seen = {rng.randint(100, 999)}; track('{phrase(rng)}');"
    )


def style(root, rng):
    tag = lxml.html.fragment_fromstring("<style>.a { color: red }</style>")
    spot(rng, root).append(tag)
    return lambda: setattr(
        tag, "text", f".a {{ color: blue }} .b {{ width: {rng.randint(1, 99)}px }}"
    )


def comment(root, rng):
    note = lxml.html.HtmlComment(f"rendered {rng.random()}")
    spot(rng, root).append(note)
    return lambda: setattr(note, "text", f"rendered {rng.random()}")


def tracking_attribute(root, rng):
    el = pick(rng, root, ("div", "a", "span", "section"))
    if el is None:
        return None
    el.set("data-impression", str(rng.random()))
    return lambda: el.set("data-impression", str(rng.random()))


VISIBLE: dict[str, Mutation] = {
    "heading_text": heading_text,
    "list_row": list_row,
    "table_row": table_row,
    "validation_class": validation_class,
    "validation_aria": validation_aria,
    "aria_invalid": aria_invalid,
    "live_region_message": live_region_message,
    "message_box_shown": message_box_shown,
    "expanded_container": expanded_container,
    "paragraph_edit": paragraph_edit,
    "text_added": text_added,
    "link_counter": link_counter,
    "button_text": button_text,
    "typed_value": typed_value,
}
NOISE: dict[str, Mutation] = {
    "ticker_unmarked": ticker_unmarked,
    "rotating_text_marked": rotating_text_marked,
    "relative_time_marked": relative_time_marked,
    "rotating_ad_marked": rotating_ad_marked,
    "token": token,
    "whitespace": whitespace,
    "script": script,
    "style": style,
    "comment": comment,
    "tracking_attribute": tracking_attribute,
}


@dataclass
class Case:
    page: str
    mutation: str
    meaningful: bool
    decided: bool
    observations: list[str]


def unmarked(html_root) -> str:
    """The page after as a snapshot taken by a client that marked only the page before."""
    for el in html_root.iter():
        if isinstance(el.tag, str) and el.get(BACKGROUND_ATTR) is not None:
            del el.attrib[BACKGROUND_ATTR]
    return lxml.html.tostring(html_root, encoding="unicode")


def transitions(path: Path, per_class: int, seed: int) -> Iterator[tuple[str, bool, str, str]]:
    """``(class, truth, page before, page after)`` for each change of each class on one page."""
    data = to_utf8(path.read_bytes())
    for truth, mutations in ((True, VISIBLE), (False, NOISE)):
        for name, mutation in mutations.items():
            for n in range(per_class):
                rng = random.Random(f"{seed}/{path.name}/{name}/{n}")
                root = lxml.html.document_fromstring(data, parser=_UTF8)
                if root.find("body") is None:
                    continue
                change = mutation(root, rng)
                if change is None:
                    continue
                before = lxml.html.tostring(root, encoding="unicode")
                change()
                yield name, truth, before, unmarked(root)


def run_page(path: Path, per_class: int, seed: int) -> list[Case]:
    cases = []
    for name, truth, before, after in transitions(path, per_class, seed):
        result = build_observation_list(capture_page_state(PAGE_URL, before), after, PAGE_URL)
        cases.append(
            Case(path.name, name, truth, result.meaningful_content_change, result.observations)
        )
    return cases


def main(
    corpus: Annotated[Path, typer.Argument(help="Folder of *.html pages.")] = DEFAULT_CORPUS,
    per_class: Annotated[int, typer.Option(min=1, help="Changes per class and page.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the random choices.")] = 0,
    examples: Annotated[int, typer.Option(help="Wrong decisions to print.")] = 10,
) -> None:
    pages = sorted(corpus.glob("*.html"))
    if not pages:
        raise SystemExit(f"no *.html pages in {corpus}")
    started = time.perf_counter()
    cases = [case for page in pages for case in run_page(page, per_class, seed)]
    print(f"{len(cases)} changes over {len(pages)} pages in {time.perf_counter() - started:.0f}s")
    print(f"{'class':24} {'truth':>7} {'n':>5} {'right':>6} {'rate':>6}")
    for name in (*VISIBLE, *NOISE):
        group = [c for c in cases if c.mutation == name]
        if group:
            right = sum(c.decided == c.meaningful for c in group)
            truth = "change" if group[0].meaningful else "noise"
            print(f"{name:24} {truth:>7} {len(group):>5} {right:>6} {right / len(group):>6.3f}")
    wrong = [c for c in cases if c.decided != c.meaningful]
    for case in wrong[:examples]:
        label = "missed" if case.meaningful else "flagged"
        print(f"  {label} {case.mutation} on {case.page}: {' | '.join(case.observations)[:220]}")
    tp = sum(c.meaningful and c.decided for c in cases)
    fp = sum(not c.meaningful and c.decided for c in cases)
    fn = sum(c.meaningful and not c.decided for c in cases)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    lines = [len(c.observations) for c in cases if c.meaningful]
    print(
        f"tp={tp} fp={fp} fn={fn}; median observation lines on a change: {statistics.median(lines)}"
    )
    print(f"RESULT precision={precision:.4f} recall={recall:.4f} transitions={len(cases)}")


if __name__ == "__main__":
    typer.run(main)
