"""The critic's level rules, flow rule and predicate checks on seeded generated manifests, against
brute-force references written here: a downstream walk from every step for missing_gate, levels by
repeated passes, a regular-expression search per dependency, predicates valid or not by construction.
The critic's own rules are the fast forms (one walk up from the gates, Kahn's order, a word set, one
type test per syntax node); these say they report the same findings."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Collection

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from veriloop.engines.plan.critic import MISSING_GATE_MIN_PARALLEL, static_review
from veriloop.engines.plan.predicates import PredicateError, compile_predicate
from veriloop.schemas.manifest import Manifest, ManifestStep

MAX_PARALLEL = 6

# (expression, compiles): comprehensions bind names, every other name must be known.
PREDICATES: list[tuple[str, bool]] = [
    ("len(result) > 2", True),
    ("'ok' in result.text", True),
    ("[x for x in result.items if x] == []", True),
    ("all(len(v) > 0 for k, v in depends.items())", True),
    ("{k: v for k, v in input.items()}.get('a') == 1", True),
    ("f'{result}' != ''", True),
    ("result if result else 'empty'", True),
    ("x > 1", False),  # unknown name
    ("any(x for x in result) and y", False),  # y is not bound by the comprehension
    ("result.__class__", False),  # private attribute
    ("(lambda: 1)()", False),
    ("open('f')", False),
    ("f'{result:>10}'", False),  # format spec
    ("result.text.upper()(1)", False),  # calls something that is not a function or method
    ("b'x' in result", False),  # bytes literal
    ("[y := 1]", False),  # NamedExpr
    ("result[", False),  # does not parse
    ("-" * 40 + "1", False),  # nested too deeply
    (" + ".join(["1"] * 250), False),  # too many nodes
]


def generated(seed: int) -> Manifest:
    """60-90 steps: task, plan-less gates and human reviews, seeded dependencies (some unknown,
    some forming cycles), ids with and without characters outside words, inputs naming some of
    their dependencies, one predicate each."""
    rng = random.Random(seed)
    n = rng.randint(60, 90)
    ids = [rng.choice(["s{}", "step-{}", "x.{}", "A_{}"]).format(i) for i in range(n)]
    steps = []
    for i, step_id in enumerate(ids):
        kind = rng.choices(["task", "synthesis_gate", "human_review"], [8, 2, 1])[0]
        depends = rng.sample(ids[:i], min(i, rng.choice([0, 0, 1, 2, 3, 5])))
        if rng.random() < 0.05:
            depends.append("nowhere")
        if i > 5 and rng.random() < 0.03:
            depends.append(ids[i + 1] if i + 1 < n else ids[0])  # a cycle (or a forward edge)
        mentioned = [d for d in depends if rng.random() < 0.6]
        expr = rng.choice(PREDICATES)[0]
        step: dict = {
            "id": step_id,
            "type": kind,
            "executor": "human" if kind == "human_review" else "llm",
            "depends_on": depends,
            "input": "use " + " ".join(f"{{{{{d}}}}}" for d in mentioned) + f" {step_id}x",
            "checks": [{"kind": "predicate", "expr": expr}],
        }
        if rng.random() < 0.2:
            step["input"] = {"from": mentioned, "note": "structured"}
        steps.append(step)
    return Manifest.model_validate({"goal": f"seed {seed}", "steps": steps})


def reference_levels(manifest: Manifest) -> list[list[str]]:
    """Levels by passes over the steps until none changes (first step of an id, known deps)."""
    first = {}
    for step in manifest.steps:
        first.setdefault(step.id, step)
    level: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for sid, step in first.items():
            deps = [d for d in step.depends_on if d in first]
            if sid not in level and all(d in level for d in deps):
                level[sid] = 1 + max((level[d] for d in deps), default=-1)
                changed = True
    levels: list[list[str]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for sid in first:
        if sid in level:
            levels[level[sid]].append(sid)
    return levels


def reference_gated(manifest: Manifest, sid: str) -> bool:
    """A synthesis gate among the step's transitive dependents: a walk down from the step."""
    types = {}
    for step in manifest.steps:
        types.setdefault(step.id, step.type)
    seen, frontier = set(), [sid]
    while frontier:
        current = frontier.pop()
        for step in manifest.steps:
            if current in step.depends_on and step.id not in seen:
                if types[step.id] == "synthesis_gate":
                    return True
                seen.add(step.id)
                frontier.append(step.id)
    return False


def reference_level_findings(manifest: Manifest) -> list[tuple[str, list[str]]]:
    """(rule, step ids) of parallel_explosion and missing_gate, level by level."""
    types = {}
    for step in manifest.steps:
        types.setdefault(step.id, step.type)
    found = []
    for level in reference_levels(manifest):
        if len(level) > MAX_PARALLEL:
            found.append(("parallel_explosion", level))
        ungated = [
            s for s in level if types[s] in ("task", "plan") and not reference_gated(manifest, s)
        ]
        if len(ungated) >= MISSING_GATE_MIN_PARALLEL:
            found.append(("missing_gate", ungated))
    return found


def reference_unused(step: ManifestStep, text: str, known: Collection[str]) -> list[str]:
    """The step's known dependencies its text never names as a whole word: a search per id."""
    return [
        d
        for d in dict.fromkeys(step.depends_on)
        if d in known
        and d != step.id
        and not re.search(rf"(?<![\w-]){re.escape(d)}(?![\w-])", text)
    ]


def reference_findings(manifest: Manifest) -> list[tuple[str, str, list[str]]]:
    """(rule, severity, step ids) of parallel_explosion, missing_gate, disconnected_flow, bad_check."""
    types = {}
    for step in manifest.steps:
        types.setdefault(step.id, step.type)
    found = [(rule, "warning", ids) for rule, ids in reference_level_findings(manifest)]
    valid = dict(PREDICATES)
    for step in manifest.steps:
        if step.type == "task":
            text = step.input if isinstance(step.input, str) else str(step.input)
            unused = reference_unused(step, text, types)
            if unused:
                found.append(("disconnected_flow", "warning", [step.id, *unused]))
        if not valid[step.checks[0].expr]:
            found.append(("bad_check", "critical", [step.id]))
    return found


RULES = {"parallel_explosion", "missing_gate", "disconnected_flow", "bad_check"}


def _in_reference_order(findings: list[tuple[str, str, list[str]]]) -> list:
    """Level rules in level order first, then per-step rules in step order (the critic's order)."""
    level_rules = [f for f in findings if f[0] in ("parallel_explosion", "missing_gate")]
    step_rules = [f for f in findings if f[0] not in ("parallel_explosion", "missing_gate")]
    return level_rules + step_rules


@pytest.mark.parametrize("seed", range(8))
def test_the_critic_reports_what_the_brute_force_references_report(seed):
    manifest = generated(seed)
    critique = static_review(manifest, max_parallel=MAX_PARALLEL)
    got = [(f.rule, f.severity, f.step_ids) for f in critique.findings if f.rule in RULES]
    expected = _in_reference_order(reference_findings(manifest))
    assert got == expected
    assert {rule for rule, _, _ in got} >= {"missing_gate", "disconnected_flow", "bad_check"}


@pytest.mark.parametrize(("expr", "compiles"), PREDICATES)
def test_a_predicate_compiles_exactly_when_it_is_valid_by_construction(expr, compiles):
    if compiles:
        compile_predicate(expr)
    else:
        with pytest.raises(PredicateError):
            compile_predicate(expr)


# Hypothesis-drawn manifests against references for every rule whose implementation is a fast
# form: ids with characters outside words (found by a trie walk, not a search per id), duplicate
# and unknown ids, self-dependencies and cycles (found with a path index), agents many steps share
# (their network tools listed once per agent), unknown agents (the names listed sorted once).

AGENT_TOOLS = {
    "web": ["web_search", "notes", "fetchUrl"],
    "writer": ["notes", "calc"],
    **{f"helper{i}": ["calc"] for i in range(11)},  # more agents than a message lists
}
NETWORK = {"web_search", "fetchUrl"}
ID_FORMS = ["s{}", "x.{}", "a b{}", "-{}", "({})", "é{}", "q·{}", "{}"]
EDGE = st.sampled_from(["", " ", "{{", "}}", "$", "${", ".", "-", "_", "x", "é", "·", "٣", "\n"])


@st.composite
def hostile_manifests(draw) -> Manifest:
    n = draw(st.integers(1, 24))
    ids = [draw(st.sampled_from(ID_FORMS)).format(i) for i in range(n)]
    for i in range(1, n):
        if draw(st.integers(0, 9)) == 0:
            ids[i] = ids[draw(st.integers(0, i - 1))]  # a duplicate id
    steps = []
    for i, step_id in enumerate(ids):
        kind = draw(st.sampled_from(["task", "task", "task", "synthesis_gate", "human_review"]))
        depends = draw(
            st.lists(st.sampled_from(ids), max_size=4)
        )  # self, later (cycles) or earlier
        if draw(st.booleans()) and i:
            depends += draw(st.lists(st.sampled_from(ids[:i]), max_size=3))
        if draw(st.integers(0, 9)) == 0:
            depends.append("nowhere")
        pieces = [
            draw(EDGE) + draw(st.sampled_from(depends or ids)) + draw(EDGE)
            for _ in range(draw(st.integers(0, 4)))
        ]
        step: dict = {"id": step_id, "type": kind, "depends_on": depends}
        if kind == "human_review":
            step["executor"] = "human"
        elif kind == "task" and draw(st.integers(0, 3)) == 0:
            step["executor"] = "shell"
            step["command"] = draw(st.sampled_from(["curl -s x", "echo ok", "make"])) + " ".join(
                pieces
            )
        else:
            step["executor"] = "llm"
            step["agent"] = draw(st.sampled_from([None, "web", "writer", "helper3", "ghost"]))
        step["input"] = "".join(pieces) if draw(st.booleans()) else {"from": pieces}
        step["critical"] = draw(st.booleans())
        steps.append(step)
    agents = {name: {"tools": tools} for name, tools in AGENT_TOOLS.items()}
    return Manifest.model_validate({"goal": "drawn", "agents": agents, "steps": steps})


def reference_cycles(manifest: Manifest) -> list[list[str]]:
    """Depth-first from each step in manifest order, a back edge's cycle found by searching the path
    and started at its earliest step; each distinct cycle once."""
    first = {}
    for step in manifest.steps:
        first.setdefault(step.id, step)
    order = {sid: i for i, sid in enumerate(first)}
    colour: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(sid: str, path: list[str]) -> None:
        colour[sid] = 1
        path.append(sid)
        for dep in first[sid].depends_on:
            if dep not in first:
                continue
            if dep not in colour:
                visit(dep, path)
            elif colour[dep] == 1:
                loop = path[path.index(dep) :]
                start = loop.index(min(loop, key=order.__getitem__))
                loop = loop[start:] + loop[:start]
                if loop not in cycles:
                    cycles.append(loop)
        colour[sid] = 2
        path.pop()

    for sid in first:
        if sid not in colour:
            visit(sid, [])
    return cycles


def reference_by_rule(manifest: Manifest) -> dict[str, list]:
    """The findings of each rule, in order: step ids, and for some the part of the message a fast
    form computes (the agents listed, the network tools named)."""
    known = {step.id for step in manifest.steps}
    found: dict[str, list] = {rule: [] for rule in DRAWN_RULES}
    for rule, ids in reference_level_findings(manifest):
        found[rule].append((ids, None))
    found["cycle"] = [(loop, None) for loop in reference_cycles(manifest)]
    listed = ", ".join(sorted(AGENT_TOOLS)[:10]) + ", ..."
    for step in manifest.steps:
        unknown = step.agent not in AGENT_TOOLS if step.agent else step.type == "task"
        if step.executor == "llm" and unknown:
            found["unknown_agent"].append(([step.id], f"(agents: {listed})"))
        if step.critical:
            tools = [t for t in AGENT_TOOLS.get(step.agent or "", []) if t in NETWORK]
            if step.executor == "llm" and tools:
                found["optimism_bias"].append(([step.id], ", ".join(tools)))
            elif step.executor == "shell" and step.command.startswith("curl"):
                found["optimism_bias"].append(([step.id], "('curl')"))
        if step.type == "task":
            text = step.input if isinstance(step.input, str) else json.dumps(step.input)
            text += f"\n{step.command or ''}"
            unused = reference_unused(step, text, known)
            if unused:
                found["disconnected_flow"].append(([step.id, *unused], None))
    return found


DRAWN_RULES = (
    "parallel_explosion",
    "missing_gate",
    "cycle",
    "unknown_agent",
    "optimism_bias",
    "disconnected_flow",
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_manifests())
def test_every_fast_rule_reports_what_its_reference_reports_on_drawn_manifests(manifest):
    critique = static_review(manifest, max_parallel=MAX_PARALLEL)
    expected = reference_by_rule(manifest)
    for rule in DRAWN_RULES:
        got = [f for f in critique.findings if f.rule == rule]
        assert [f.step_ids for f in got] == [ids for ids, _ in expected[rule]], rule
        for finding, (_, part) in zip(got, expected[rule], strict=True):
            assert part is None or part in finding.message, (rule, finding.message)
