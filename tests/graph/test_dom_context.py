"""The bounded DOM window shown to refinement, action and correction prompts."""

from __future__ import annotations

import pytest
from patient_pages import big_page

from veriloop.engines.dom_context import (
    build_dom_context,
    compact_page,
    hint_words,
    page_element_ids,
)
from veriloop.schemas.observation import BeforeState


def test_small_page_is_shown_whole_but_compacted(page):
    context = build_dom_context(page("patients"), max_chars=8000)
    assert 'data-veriloop-id="4"' in context and "New patient" in context
    assert "window.analytics" not in context  # scripts dropped
    assert "font-family" not in context  # styles dropped
    assert "<title>" not in context  # head dropped


def test_large_page_is_bounded_and_centred_on_focus_and_hints():
    html = big_page()
    assert len(html) > 30_000
    context = build_dom_context(
        html, focus_ids=[250 + 100], hints=hint_words("Save the record"), max_chars=3000
    )
    assert len(context) <= 3000
    assert 'data-veriloop-id="350"' in context  # the focused element
    assert 'data-veriloop-id="7"' in context and "Save record" in context  # the hinted element
    assert 'data-veriloop-id="110"' not in context  # far from both: left out
    assert "onclick" not in context and "class=" not in context and "style=" not in context
    assert "Hidden delete" not in context


def test_hints_anchor_on_numbered_start_tags_and_their_text_only():
    from veriloop.engines.dom_context import _numbered_tags

    text = (
        '<p>data-veriloop-id="1" save</p>'  # the attribute's text in page text: not an element
        '<a title="x>y" data-veriloop-id="2">save</a>'  # a ">" before it: not a start tag we read
        '<a data-veriloop-id="x3">save</a>'  # not a number
        '<button class="b" data-veriloop-id="4" type="submit">Save record</button>'
        '<input data-veriloop-id="55">'
    )

    tags = list(_numbered_tags(text))

    assert tags == [
        (text.index("<button"), '<button class="b" data-veriloop-id="4" type="submit">Save record'),
        (text.index("<input"), '<input data-veriloop-id="55">'),
    ]


def test_without_anchors_the_window_starts_at_the_top():
    context = build_dom_context(big_page(), max_chars=2000)
    assert len(context) <= 2000
    assert "New patient" in context
    assert "Save record" not in context


def test_page_element_ids_reads_the_page_contract_attribute(page):
    assert page_element_ids(page("patient_form")) == {1, 2, 5, 6, 7, 8}
    assert page_element_ids("") == frozenset()
    assert build_dom_context("", max_chars=100) == ""


def test_hint_words_drop_short_and_common_words():
    assert hint_words("Click the Save button", "Type Jas") == ["save", "jas"]


def test_pages_the_skeleton_reads_give_a_context_too():
    # One parser for the engine layer: an XML declaration, NUL bytes, a meta charset in bytes.
    xhtml = (
        '<?xml version="1.0" encoding="utf-8"?><html><body>'
        '<button data-veriloop-id="3">Save record</button></body></html>'
    )
    expected = '<body><button data-veriloop-id="3">Save record</button></body>'
    assert build_dom_context(xhtml) == expected
    assert page_element_ids(xhtml) == {3}
    legacy = (
        '<html><head><meta charset="windows-1251"></head><body>'
        '<a data-veriloop-id="4" href="/s">Сохранить</a>\x00</body></html>'
    ).encode("cp1251")
    assert "Сохранить" in build_dom_context(legacy)
    assert page_element_ids(legacy) == {4}


def test_control_characters_are_dropped_not_raised():
    # lxml parses C0 control characters but refuses to serialise them; a page full of them must still give a context.
    html = '<html><body><p>Pa\x18tients\x00</p><button data-veriloop-id="3">Sa\x01ve</button></body></html>'
    context = build_dom_context(html)
    assert "Patients" in context and "Save" in context
    assert not any(ch in context for ch in "\x00\x01\x18")


def test_page_text_is_squashed_whatever_its_characters():
    # Blank text goes; each run of whitespace, of any kind, is one space (hostile text: test_compact_page).
    html = (
        "<html><body><p>  a \t b\u00a0c </p>\n  <p>plain text</p><div>\x0b</div>x\x1c</body></html>"
    )
    page = compact_page(html)
    assert page.html == "<body><p> a b c </p><p>plain text</p><div></div>x</body>"


def test_element_ids_are_read_from_every_top_level_element():
    # libxml2 makes the second <html> of a raw page a sibling of the first; its ids are still ids.
    html = (
        '<html><body><a data-veriloop-id="1">a</a><p data-veriloop-hidden="1">'
        '<a data-veriloop-id="3">gone</a></p></body></html>'
        '<html><body><a data-veriloop-id="2">b</a></body></html>'
    )
    page = compact_page(html)
    assert page.element_ids == {1, 2, 3}
    assert "gone" not in page.html


def test_many_tasks_pages_stay_parsed_between_their_nodes(monkeypatch):
    # 300 tasks' pages read in turn, then each again (the next node of each task): one parse each.
    from veriloop.engines import dom_context

    parses = []
    real = dom_context.parse_html
    monkeypatch.setattr(dom_context, "parse_html", lambda html: parses.append(1) or real(html))
    pages = [big_page(rows=20).replace("New patient", f"New patient {tab}") for tab in range(300)]
    first = [dom_context.compact_page(page) for page in pages]
    again = [dom_context.compact_page(page) for page in pages]
    assert len(parses) == 300  # an 8-entry cache parsed all 600
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_the_page_cache_is_bounded_by_the_size_of_its_pages_not_by_their_count():
    from veriloop.engines.dom_context import PAGE_CACHE_BYTES, compact_page

    page = big_page(rows=2_000)
    entry = compact_page(page)
    cache = compact_page.cache
    assert cache.maxsize == PAGE_CACHE_BYTES
    # An entry costs its page (the key it keeps alive) and its compact form.
    assert cache.getsizeof(entry) >= len(page) + len(entry.html)
    assert cache.currsize <= PAGE_CACHE_BYTES


@pytest.mark.anyio
@pytest.mark.parametrize(("page_processes", "parsed_here"), [(0, 1), (1, 0)])
async def test_a_verified_page_is_parsed_once_for_its_verdict_and_the_next_prompt(
    parses, page_processes, parsed_here
):
    # The observation's parse also gives the compact page the next action's prompt reads; with
    # page processes that parse is theirs, and the page comes back into this process's cache.
    from veriloop.engines import dom_context, observation
    from veriloop.engines.verification import observe_action
    from veriloop.page_processes import offload_for

    before_page, after_page = big_page(rows=30), big_page(rows=31)
    before = observation.capture_page_state("http://app.test/", before_page)
    dom_context.compact_page.cache.clear()
    parses.clear()  # count from here

    observed = await observe_action(
        action="click(4)",
        step_index=0,
        before_state=before.stored(),  # as graph state keeps it
        current_dom=after_page,
        current_url="http://app.test/",
        offload=offload_for(page_processes),
    )
    page = dom_context.compact_page(after_page)

    assert observed.facts.meaningful_content_change
    # The next action's before_state, whole, with its skeleton as text for the serving process.
    assert isinstance(observed.page_state["semantic_skeleton"], str)
    assert BeforeState.model_validate(observed.page_state).semantic_skeleton["elements"]
    assert len(parses) == parsed_here, parses
    assert page == dom_context.read_compact_page(after_page)  # what a parse of its own gives
    assert 130 in page.element_ids  # the new row
    assert "Hidden delete" not in page.html


def test_a_task_s_first_step_parses_its_page_once(agent, jas, observe, parses):
    # Planning, refinement and the action read the compact page, and the action records the page
    # state: one parse gives both.
    from veriloop.engines import dom_context

    dom_context.compact_page.cache.clear()  # other tests compacted these fixture pages
    parses.clear()
    first = agent.step(observe("patients", query="Add a patient named Jas"))

    assert first.action == "click(4)"
    assert len(parses) == 1, parses


def test_each_step_of_a_task_parses_its_page_once_after_the_first(
    agent, jas, observe, verdict, parses
):
    # Through the graph: the verified page's parse also serves the lookahead's prompt.
    from veriloop.engines import dom_context

    jas.script("verification", verdict(True, False, 0.9, "The new patient form opened."))
    first = agent.step(observe("patients", query="Add a patient named Jas"))
    dom_context.compact_page.cache.clear()  # other tests compacted these fixture pages
    parses.clear()  # count from here

    second = agent.step(observe("patient_form", task_id=first.task_id))

    assert second.action == 'setValue(5, "Jas")' and second.verification.success
    assert len(parses) == 1, parses
