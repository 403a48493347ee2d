"""The plan critic: static rules over a manifest before anything runs, and the optional LLM review.

:func:`static_review` applies the rules below to the manifest and every nested plan (locations are
prefixed like ``steps[3] (id 'p').plan.steps[0] (id 'q')``). Severity and thresholds follow seed 003:

- missing_gate (warning): 3 or more task/plan steps of one dependency level have no synthesis_gate
  among their (transitive) dependents.
- parallel_explosion: more than ``max_parallel`` (default 10) steps in one dependency level.
  Critical when a model wrote any of them (the meta-planner's guard against a runaway plan); a
  warning for a user's manifest, which runs them bounded by its concurrency.
- optimism_bias (warning): a critical step whose executor is known flaky: an llm step whose agent has
  a network tool (a name token starting with one of :data:`FLAKY_TOOLS`), a python step calling such a
  function, or a shell step whose command matches :data:`FLAKY_COMMANDS` (curl, git push, pip install...).
- disconnected_flow (warning): a task/plan step declares a dependency whose id never appears as a
  word in its input (text, or JSON of a structured input) or command; ``{{id}}``, ``${id}`` and
  ``$id`` placeholders all count. Gates and human reviews are exempt: they receive their
  dependencies' results whole.
- bad_check (critical): a predicate check that does not compile.
- unresolvable_check (critical): a command check of a model-written step (``origin: model``) whose
  command cannot be resolved to what it executes (``$(...)``, backticks, ``eval``, a program taken
  from a variable, unparseable quoting): what it runs cannot be protected from the step it judges.
- useless_retry (warning): on_failure retry with max_retries 0, or on a step that cannot act on a
  corrective prompt (``step.self_correcting`` is False: shell, python, plan, human).
- every structural problem of :func:`~veriloop.engines.plan.manifest.manifest_problems`
  (missing_dependency, cycle, duplicate_id, unknown_agent, unknown_tool, too_deep, invalid) is a
  critical finding under its own rule name.

``score = max(0, 10 - 3 * critical - 1 * warning)``. A critique with a critical finding, or an LLM
review that did not approve, has ``has_critical``: the plan does not run as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import cache

from veriloop.engines.critic import parse_critic_response
from veriloop.engines.plan.judge.executed import unresolvable
from veriloop.engines.plan.manifest import (
    DEFAULT_MAX_DEPTH,
    _lenient_levels,
    _step_loc,
    _where,
    manifest_problems,
    upstream_of,
)
from veriloop.llm.base import Message
from veriloop.prompts.plan_critic import PLAN_CRITIC_SYSTEM, plan_critic_user_message
from veriloop.schemas.manifest import AgentSpec, Manifest, ManifestStep
from veriloop.schemas.plan_run import CriticFinding, Critique

MISSING_GATE_MIN_PARALLEL = 3
"""missing_gate fires at this many ungated steps in one level."""
PARALLEL_EXPLOSION_MAX = 10
"""parallel_explosion fires above this many steps in one level (the default of ``max_parallel``)."""
CRITICAL_PENALTY = 3
WARNING_PENALTY = 1
MAX_SCORE = 10

FLAKY_TOOLS: tuple[str, ...] = (
    "http",
    "fetch",
    "web",
    "search",
    "browse",
    "api",
    "email",
    "mail",
    "post",
    "request",
    "download",
    "upload",
    "url",
    "scrape",
    "crawl",
    "webhook",
    "slack",
    "sms",
)
"""Tool-name fragments of network operations: a tool is flaky when a token of its name (split at
``_``, ``-``, ``.``, spaces and camelCase) starts with one of them (``web_search``, ``fetchUrl``,
``send_email``, ``http_get``)."""

FLAKY_COMMANDS: tuple[str, ...] = (
    r"\bcurl\b",
    r"\bwget\b",
    r"\bssh\b",
    r"\bscp\b",
    r"\brsync\b",
    r"\bgit\s+(push|pull|fetch|clone)\b",
    r"\bpip3?\s+install\b",
    r"\buv\s+(pip\s+install|add|sync)\b",
    r"\b(npm|pnpm|yarn)\s+(install|i|ci|add|publish)\b",
    r"\b(apt|apt-get|brew|dnf|yum|apk)\s+(install|add|update)\b",
    r"\bdocker\s+(pull|push|login)\b",
    r"\bcargo\s+(install|publish)\b",
    r"\bgo\s+get\b",
    r"\bgh\s+\w",
    r"\b(aws|gcloud|az|kubectl)\s+\w",
    r"\bping\b",
    r"\bnc\b",
    r"https?://",
)
"""Regular expressions of shell commands that depend on the network."""

RECOMMENDATIONS: dict[str, str] = {
    "missing_gate": "Add a synthesis_gate step that depends on the parallel steps, combines their "
    "results and checks them before anything consumes them.",
    "parallel_explosion": "Keep the steps of one dependency level within the limit: batch the "
    "work into fewer steps or split it into nested plans.",
    "optimism_bias": "Do not mark flaky network steps critical, or give them on_failure retry with "
    "max_retries (llm steps) or a fallback step.",
    "disconnected_flow": "Use each dependency's result in the step's input ({{step_id}}) or drop "
    "the dependency.",
    "bad_check": "Fix the predicate so it compiles (an expression over input, result and depends "
    "returning true, false or a diagnosis string).",
    "unresolvable_check": "Write command checks as plain commands (`python3 checks/verify.py`, "
    "`make test-x`, `bash checks/run.sh`) so what they execute can be protected from the step.",
    "useless_retry": "Use on_failure retry only on llm steps with max_retries of 1 or more; use "
    "halt_if_critical, continue or replan for deterministic steps.",
    "missing_dependency": "Make every depends_on name an existing step id.",
    "cycle": "Break the dependency cycle: a step cannot depend, even indirectly, on itself.",
    "duplicate_id": "Give every step and agent a unique name.",
    "unknown_agent": "Name an agent defined under agents for every llm step.",
    "unknown_tool": "Use only the tools available to this run.",
    "too_deep": "Flatten nested plans: a plan step inside a plan step may not go deeper than the limit.",
    "invalid": "Fix the manifest's fields (types, required fields, type/executor pairs).",
    "llm_review": "Address the problems the LLM review named.",
}

_NAME_TOKEN_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _is_flaky_tool(name: str, fragments: Collection[str]) -> bool:
    tokens = [t.lower() for t in _NAME_TOKEN_SPLIT.split(name) if t]
    return any(token.startswith(fragment.lower()) for token in tokens for fragment in fragments)


def _flaky_reason(
    step: ManifestStep,
    network_tools: Callable[[str], list[str]],
    flaky_tools: Collection[str],
    flaky_commands: Sequence[str],
) -> str | None:
    """Why the step's executor is known flaky, or None; ``network_tools`` names an agent's flaky
    tools (an empty list for an unknown agent)."""
    if step.executor == "llm" and step.agent is not None:
        tools = network_tools(step.agent)
        if tools:
            return f"its agent '{step.agent}' uses network tool(s) {', '.join(tools)}"
    if step.executor == "python" and step.function and _is_flaky_tool(step.function, flaky_tools):
        return f"it calls network function '{step.function}'"
    if step.executor == "shell" and step.command:
        for pattern in flaky_commands:
            match = re.search(pattern, step.command)
            if match:
                return f"its command uses the network ('{match.group(0).strip()}')"
    return None


_WORD = re.compile(r"[\w-]+")
_ID_END = object()
"""The trie key of :func:`_mentioned` marking where an id ends."""


def _in_word(char: str) -> bool:
    """The character is one of :data:`_WORD`'s (``\\w`` is ``str.isalnum`` and ``_``)."""
    return char.isalnum() or char in "_-"


def _mentioned(text: str, step_ids: Iterable[str]) -> set[str]:
    """The ids that appear in the text as whole words, with no word character or hyphen on either
    side (so ``{{id}}``, ``${id}``, ``$id``, ``{{ id.field }}`` count).

    One pass over the text for all of them (a search of the text per id was quadratic in a step
    with many dependencies): an id of :data:`_WORD` characters alone is mentioned when it is one of
    the text's runs of them; other ids (``x.1``, ``a b``) are walked in a trie from every place a
    whole word may start, only as far as the text follows one of them.
    """
    found: set[str] = set()
    trie: dict = {}
    words = set(_WORD.findall(text))
    for step_id in step_ids:
        if _WORD.fullmatch(step_id):
            if step_id in words:
                found.add(step_id)
            continue
        node = trie
        for char in step_id:
            node = node.setdefault(char, {})
        node[_ID_END] = step_id
    if not trie:
        return found
    for start in range(len(text) + 1):
        if start and _in_word(text[start - 1]):
            continue
        node, at = trie, start
        while node is not None:
            if _ID_END in node and (at == len(text) or not _in_word(text[at])):
                found.add(node[_ID_END])
            if at == len(text):
                break
            node = node.get(text[at])
            at += 1
    return found


def _flow_text(step: ManifestStep) -> str:
    text = step.input if isinstance(step.input, str) else json.dumps(step.input, default=str)
    return f"{text}\n{step.command or ''}"


def _check_problem(expr: str) -> str | None:
    """Why a predicate does not compile, or None; None too when no compiler is installed."""
    try:
        from veriloop.engines.plan.predicates import compile_predicate
    except ImportError:
        return None
    try:
        compile_predicate(expr)
    except Exception as exc:  # PredicateError, or any crash of the compiler on this input
        return str(exc) or type(exc).__name__
    return None


def _review(
    manifest: Manifest,
    prefix: str,
    depth: int,
    inherited: Mapping[str, AgentSpec],
    flaky_tools: Collection[str],
    flaky_commands: Sequence[str],
    max_depth: int,
    max_parallel: int,
) -> list[CriticFinding]:
    if depth > max_depth:
        return []  # manifest_problems reports too_deep
    findings: list[CriticFinding] = []
    where = _where(prefix)
    agents = {**inherited, **manifest.agents}
    # An agent's network tools, found once per agent (once per step was steps x tools).
    network_tools = cache(
        lambda name: (
            [t for t in agents[name].tools if _is_flaky_tool(t, flaky_tools)]
            if name in agents
            else []
        )
    )
    types, origins = {}, {}
    for step in manifest.steps:
        types.setdefault(step.id, step.type)
        origins.setdefault(step.id, step.origin)
    # One walk up from the gates, not one walk down from every step (quadratic in a wide plan).
    gated = upstream_of(manifest, [sid for sid, t in types.items() if t == "synthesis_gate"])
    levels, _ = _lenient_levels(manifest.steps)

    for number, level in enumerate(levels):
        if len(level) > max_parallel:
            by_model = any(origins[sid] == "model" for sid in level)
            findings.append(
                CriticFinding(
                    rule="parallel_explosion",
                    severity="critical" if by_model else "warning",
                    message=f"{where}level {number} runs {len(level)} steps in parallel "
                    f"(more than {max_parallel})"
                    + ("" if by_model else "; they run bounded by the run's concurrency"),
                    step_ids=list(level),
                )
            )
        ungated = [sid for sid in level if types[sid] in ("task", "plan") and sid not in gated]
        if len(ungated) >= MISSING_GATE_MIN_PARALLEL:
            findings.append(
                CriticFinding(
                    rule="missing_gate",
                    severity="warning",
                    message=f"{where}level {number} has {len(ungated)} parallel steps "
                    f"({', '.join(ungated)}) with no synthesis_gate downstream",
                    step_ids=ungated,
                )
            )

    known = set(types)
    for index, step in enumerate(manifest.steps):
        loc = _step_loc(prefix, index, step.id)
        if step.critical:
            reason = _flaky_reason(step, network_tools, flaky_tools, flaky_commands)
            if reason:
                findings.append(
                    CriticFinding(
                        rule="optimism_bias",
                        severity="warning",
                        message=f"{loc}: critical step is flaky: {reason}",
                        step_ids=[step.id],
                    )
                )
        if step.type in ("task", "plan"):
            candidates = [d for d in dict.fromkeys(step.depends_on) if d in known and d != step.id]
            mentioned = _mentioned(_flow_text(step), candidates)
            unused = [d for d in candidates if d not in mentioned]
            if unused:
                names = ", ".join(f"'{d}'" for d in unused)
                findings.append(
                    CriticFinding(
                        rule="disconnected_flow",
                        severity="warning",
                        message=f"{loc}: depends on {names} but its input never uses "
                        f"{'it' if len(unused) == 1 else 'them'} (write {{{{{unused[0]}}}}} "
                        "where the result is used)",
                        step_ids=[step.id, *unused],
                    )
                )
        for check_index, check in enumerate(step.checks):
            if check.kind == "command" and step.origin == "model" and check.command:
                reasons = unresolvable(check.command)
                if reasons:
                    findings.append(
                        CriticFinding(
                            rule="unresolvable_check",
                            severity="critical",
                            message=f"{loc}.checks[{check_index}]: what the command check runs "
                            f"cannot be resolved: {'; '.join(reasons)}",
                            step_ids=[step.id],
                        )
                    )
            if check.kind != "predicate" or check.expr is None:
                continue
            problem = _check_problem(check.expr)
            if problem:
                findings.append(
                    CriticFinding(
                        rule="bad_check",
                        severity="critical",
                        message=f"{loc}.checks[{check_index}]: predicate does not compile: {problem}",
                        step_ids=[step.id],
                    )
                )
        if step.on_failure == "retry":
            reasons = []
            if step.max_retries == 0:
                reasons.append("max_retries is 0")
            if not step.self_correcting:
                reasons.append(f"a {step.executor} step cannot act on a corrective prompt")
            if reasons:
                findings.append(
                    CriticFinding(
                        rule="useless_retry",
                        severity="warning",
                        message=f"{loc}: on_failure retry never helps: {'; '.join(reasons)}",
                        step_ids=[step.id],
                    )
                )
        if step.plan is not None:
            findings += _review(
                step.plan,
                f"{loc}.plan.",
                depth + 1,
                agents,
                flaky_tools,
                flaky_commands,
                max_depth,
                max_parallel,
            )
    return findings


def critique_of(findings: Sequence[CriticFinding], llm_approved: bool | None = None) -> Critique:
    """The critique for these findings: score, one-sentence summary, one recommendation per rule."""
    critical = sum(1 for f in findings if f.severity == "critical")
    warnings = sum(1 for f in findings if f.severity == "warning")
    score = max(0, MAX_SCORE - CRITICAL_PENALTY * critical - WARNING_PENALTY * warnings)
    rules = list(dict.fromkeys(f.rule for f in findings))
    if findings:
        summary = (
            f"Score {score}/{MAX_SCORE}: {critical} critical finding(s) and {warnings} warning(s) "
            f"({', '.join(rules)})."
        )
    else:
        summary = f"Score {score}/{MAX_SCORE}: no findings."
    if llm_approved is True:
        summary = summary[:-1] + "; the LLM review approved the plan."
    recommendations = [RECOMMENDATIONS.get(rule, f"Fix the {rule} findings.") for rule in rules]
    return Critique(
        score=score,
        findings=list(findings),
        summary=summary,
        recommendations=recommendations,
        llm_approved=llm_approved,
    )


def rejection_reason(critique: Critique) -> str:
    """Why the critic rejected a plan, located like a parse error: each critical finding's message
    (``steps[0] (id 'a').checks[0]: ...``), then the summary."""
    critical = [f.message for f in critique.findings if f.severity == "critical"]
    if critique.llm_approved is False:
        critical.append("the LLM review did not approve the plan")
    if len(critical) == 1:
        return f"plan rejected by the critic: {critical[0]} ({critique.summary})"
    lines = "\n".join(f"- {message}" for message in critical)
    return f"plan rejected by the critic ({len(critical)} problems):\n{lines}\n{critique.summary}"


def static_review(
    manifest: Manifest,
    *,
    tools: Collection[str] | None = None,
    flaky_tools: Collection[str] = FLAKY_TOOLS,
    flaky_commands: Sequence[str] = FLAKY_COMMANDS,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_parallel: int = PARALLEL_EXPLOSION_MAX,
) -> Critique:
    """The static critique of a manifest (rules in the module docstring); no model call.

    Structural problems come first (as critical findings under their own rule), then the critic's
    rules in manifest order, nested plans after their plan step.
    """
    findings = [
        CriticFinding(
            rule=problem.rule,
            severity="critical",
            message=problem.message,
            step_ids=list(problem.step_ids),
        )
        for problem in manifest_problems(manifest, tools=tools, max_depth=max_depth)
    ]
    findings += _review(manifest, "", 1, {}, flaky_tools, flaky_commands, max_depth, max_parallel)
    return critique_of(findings)


def critic_messages(manifest: Manifest, goal: str) -> list[Message]:
    """System and user messages asking a model to review ``manifest`` for ``goal``.

    The manifest travels as JSON inside the ``PLAN_MANIFEST`` fence (it is untrusted model output);
    the answer must end with ``<Approved>YES</Approved>`` or ``<Approved>NO</Approved>``.
    """
    manifest_json = json.dumps(manifest.model_dump(mode="json", exclude_none=True), indent=2)
    return [
        {"role": "system", "content": PLAN_CRITIC_SYSTEM},
        {"role": "user", "content": plan_critic_user_message(goal, manifest_json)},
    ]


_REVIEW_EXCERPT_CHARS = 500


def with_llm_review(critique: Critique, review_text: str | None) -> Critique:
    """The critique with the LLM review's verdict.

    ``llm_approved`` is read only from the ``<Approved>`` tag (:func:`parse_critic_response`: a
    missing, misspelt or contradictory tag is not an approval). When not approved, a critical
    ``llm_review`` finding with an excerpt of the review is added and the score recomputed.
    """
    approved = parse_critic_response(review_text)
    findings = list(critique.findings)
    if not approved:
        text = (review_text or "").strip()
        if not re.search(r"<Approved>(YES|NO)</Approved>", text):
            reason = "the LLM review gave no <Approved> verdict"
        else:
            reason = "the LLM review did not approve the plan"
        excerpt = text[:_REVIEW_EXCERPT_CHARS] + (
            "..." if len(text) > _REVIEW_EXCERPT_CHARS else ""
        )
        findings.append(
            CriticFinding(
                rule="llm_review",
                severity="critical",
                message=f"{reason}: {excerpt}" if excerpt else reason,
            )
        )
    return critique_of(findings, llm_approved=approved)
