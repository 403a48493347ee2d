"""The second look of a grounded verification: the first verdict's messages plus fenced search results.

Search results are web text: untrusted exactly like page text, so they sit only inside their own
fence (:func:`~veriloop.prompts.page_data.fenced`, label ``SEARCH_RESULTS``) and the system prompt
carries that fence's rule.
"""

from __future__ import annotations

from veriloop.prompts.page_data import fence_rule, fenced

SEARCH_RESULTS = "SEARCH_RESULTS"
SEARCH_RESULTS_RULE = fence_rule(SEARCH_RESULTS, "text found by a web search")
LOOKUP_QUERY_RULE = (
    "- lookup_query: when your verdict depends on a fact the observations cannot settle (a price, "
    "a date, whether an item or place exists), a short web search query for it; else null."
)


def render_results(answer: str | None, hits: list[tuple[str, str, str]]) -> str:
    """The search answer and its numbered sources ``(title, url, content)`` as plain text."""
    lines = [answer] if answer else []
    for number, (title, url, content) in enumerate(hits, start=1):
        lines.append(f"[{number}] {title} <{url}>" + (f"\n{content}" if content else ""))
    return "\n".join(lines)


def grounded_messages(
    messages: list[dict[str, str]], query: str, results: str
) -> list[dict[str, str]]:
    """``messages`` of the first verdict, the fence rule added, and the results to judge again with."""
    system, *rest = messages
    return [
        {**system, "content": f"{system['content']}\n\n{SEARCH_RESULTS_RULE}"},
        *rest,
        {
            "role": "user",
            "content": "A web search found:\n"
            + fenced(f"Query: {query}\n{results}", SEARCH_RESULTS)
            + "\nJudge the action again with these facts. Set lookup_query to null.",
        },
    ]
