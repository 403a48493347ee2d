"""Web search for grounded verification: two providers of one small interface.

A :class:`~veriloop.llm.base.SearchProvider` (the interface lives with the model boundary's
contract, so the engines use it without loading these providers' clients) turns one query into :class:`SearchResults` (an
answer text when the provider writes one, the sources, and the usage of the
lookup, priced) or raises :class:`SearchUnavailable`; callers degrade to
judging without it. Results are untrusted text: the caller fences them like
page text before a model sees them.

- :class:`OpenAIWebSearch`: the model provider's own search through the ``openai``
  SDK, on the same endpoint and key as the model calls. A search-capable chat
  model (a name containing ``search``, such as ``gpt-4o-mini-search-preview``)
  is asked through chat completions with ``web_search_options``; any other
  model through the Responses API with the ``web_search`` tool.
- :class:`TavilySearch`: Tavily through its maintained client (``tavily-python``),
  keyed by ``TAVILY_API_KEY``; ``TAVILY_BASE_URL`` points it elsewhere (a proxy, a
  test stand-in).

``search_for(context, purpose)`` builds the provider a purpose's settings name
(``Context.purposes[purpose]["grounding"]``), or None when grounding is off.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import openai
from openai import AsyncOpenAI
from tavily import AsyncTavilyClient
from tavily import errors as tavily_errors

from veriloop.context import Context
from veriloop.llm import get_llm
from veriloop.llm.base import (
    GROUNDING,
    SearchHit,
    SearchProvider,
    SearchResults,
    SearchUnavailable,
)
from veriloop.llm.openai_client import PURPOSE_HEADER, OpenAIStructuredLLM
from veriloop.llm.pricing import usage_for
from veriloop.schemas.usage import ModelUsage, Purpose, Usage

OPENAI_WEB_SEARCH_USD = 0.01
"""OpenAI's list price of one web search call ($10 per 1,000), on top of the tokens."""
TAVILY_USD_PER_CREDIT = 0.008
"""Tavily's pay-as-you-go price of one API credit (a basic search costs 1, an advanced one 2)."""
TAVILY_BASE_URL_ENV = "TAVILY_BASE_URL"
MAX_RESULTS = 5
SEARCH_INSTRUCTIONS = (
    "Search the web and answer in a few sentences with the facts that settle this question, "
    "citing your sources: "
)


class TavilySearch:
    """Tavily's search API through ``AsyncTavilyClient`` (one client per lookup: lookups are rare)."""

    name = "tavily"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_results: int = MAX_RESULTS,
        timeout_s: float = 30.0,
    ) -> None:
        self.api_key = api_key or os.environ.get("TAVILY_API_KEY") or None
        self.base_url = base_url or os.environ.get(TAVILY_BASE_URL_ENV) or None
        self.max_results = max_results
        self.timeout_s = timeout_s

    async def asearch(self, query: str) -> SearchResults:
        try:
            async with AsyncTavilyClient(
                api_key=self.api_key, api_base_url=self.base_url
            ) as client:
                body = await client.search(
                    query,
                    max_results=self.max_results,
                    include_answer=True,
                    include_usage=True,
                    timeout=self.timeout_s,
                )
            hits = [
                SearchHit(
                    title=str(item.get("title") or ""),
                    url=str(item["url"]),
                    content=str(item.get("content") or ""),
                )
                for item in body.get("results") or []
            ]
            credits = float((body.get("usage") or {}).get("credits", 1))
        except (
            httpx.HTTPError,
            tavily_errors.UsageLimitExceededError,
            tavily_errors.ForbiddenError,
            tavily_errors.InvalidAPIKeyError,
            tavily_errors.BadRequestError,
            tavily_errors.TimeoutError,
            tavily_errors.MissingAPIKeyError,
            ValueError,  # the body is not JSON
            KeyError,  # a result without a url
            AttributeError,  # the body is not an object
            TypeError,
        ) as exc:
            raise SearchUnavailable(f"tavily: {type(exc).__name__}: {exc}") from exc
        spent = ModelUsage(cost_usd=round(credits * TAVILY_USD_PER_CREDIT, 10), calls=1)
        return SearchResults(
            query=query,
            hits=hits,
            answer=body.get("answer") or None,
            usage=Usage(**spent.model_dump(), by_model={self.name: spent}),
        )


class OpenAIWebSearch:
    """The provider's own web search through the ``openai`` SDK, where the endpoint offers it."""

    name = "openai"

    def __init__(self, llm: OpenAIStructuredLLM) -> None:
        self.llm = llm
        """The grounding purpose's client: its model searches, on its endpoint, key and prices."""

    @property
    def model(self) -> str:
        return self.llm.model

    async def asearch(self, query: str) -> SearchResults:
        headers = {PURPOSE_HEADER: GROUNDING}
        prompt = SEARCH_INSTRUCTIONS + query
        try:
            sync = self.llm.client  # the same endpoint, key, timeout and retries, async
            async with AsyncOpenAI(
                api_key=sync.api_key,
                base_url=sync.base_url,
                timeout=sync.timeout,
                max_retries=sync.max_retries,
            ) as client:
                if "search" in self.model:  # a search-capable chat model
                    completion = await client.chat.completions.create(
                        model=self.model,
                        messages=[{"role": "user", "content": prompt}],
                        web_search_options={},
                        extra_headers=headers,
                    )
                    answer, hits, tokens, searches = _from_chat(completion)
                else:
                    response = await client.responses.create(
                        model=self.model,
                        input=prompt,
                        tools=[{"type": "web_search"}],
                        extra_headers=headers,
                    )
                    answer, hits, tokens, searches = _from_response(response)
        except (openai.APIError, ValueError, AttributeError, TypeError, IndexError) as exc:
            raise SearchUnavailable(f"openai web search ({self.model}): {exc}") from exc
        usage = usage_for(self.model, *tokens, self.llm.prices)
        fee = round(searches * OPENAI_WEB_SEARCH_USD, 10)
        spent = usage.by_model[self.model].model_copy(
            update={"cost_usd": round(usage.cost_usd + fee, 10)}
        )
        return SearchResults(
            query=query,
            hits=hits,
            answer=answer or None,
            usage=Usage(**spent.model_dump(), by_model={self.model: spent}),
        )


def _from_chat(completion: Any) -> tuple[str, list[SearchHit], tuple[int, int], int]:
    message = completion.choices[0].message
    hits = _distinct(
        SearchHit(title=a.url_citation.title or "", url=a.url_citation.url)
        for a in message.annotations or []
        if a.type == "url_citation"
    )
    usage = completion.usage
    tokens = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
    return message.content or "", hits, tokens, 1


def _from_response(response: Any) -> tuple[str, list[SearchHit], tuple[int, int], int]:
    cited = []
    searches = 0
    for item in response.output:
        if item.type == "web_search_call":
            searches += 1
        elif item.type == "message":
            for part in item.content:
                for a in getattr(part, "annotations", None) or []:
                    if a.type == "url_citation":
                        cited.append(SearchHit(title=a.title or "", url=a.url))
    usage = response.usage
    tokens = (usage.input_tokens, usage.output_tokens) if usage else (0, 0)
    return response.output_text, _distinct(cited), tokens, searches


def _distinct(hits: Any) -> list[SearchHit]:
    seen: dict[str, SearchHit] = {}
    for hit in hits:
        seen.setdefault(hit.url, hit)
    return list(seen.values())


def search_for(context: Context, purpose: Purpose) -> SearchProvider | None:
    """The search provider ``purpose``'s settings enable, or None (grounding is off by default)."""
    provider = context.for_purpose(purpose).get("grounding")
    if provider is None:
        return None
    if provider == "tavily":
        return TavilySearch(timeout_s=context.llm_timeout_s)
    return OpenAIWebSearch(get_llm(context, GROUNDING))
