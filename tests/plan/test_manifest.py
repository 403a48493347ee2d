"""Manifests: lenient reading, located rejections, forced origin, levels, downstream, repairs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from veriloop.engines.plan.manifest import (
    ManifestError,
    ManifestLimits,
    Problem,
    apply_repair,
    dependency_levels,
    downstream_of,
    load_manifest,
    manifest_from_draft,
    manifest_problems,
    upstream_of,
)
from veriloop.schemas.manifest import AgentSpec, CheckSpec, Manifest, ManifestStep
from veriloop.schemas.plan_outputs import AgentDraft, ManifestDraft, RepairDraft, StepDraft

TOOLS = ["read_file", "run_tests", "write_file"]

CANONICAL = {
    "goal": "ship it",
    "agents": {
        "coder": {"prompt": "Write code", "tools": ["read_file", "write_file"]},
        "tester": {"prompt": "Test code", "tools": ["run_tests"]},
    },
    "steps": [
        {"id": "write", "agent": "coder", "input": "Write the module"},
        {
            "id": "merge",
            "type": "synthesis_gate",
            "agent": "tester",
            "input": "Combine {{write}}",
            "depends_on": ["write"],
            "on_failure": "retry",
            "max_retries": 2,
            "checks": [{"kind": "predicate", "expr": "result == 1"}],
        },
        {"id": "test", "command": "pytest -q", "depends_on": ["write", "merge"]},
        {"id": "approve", "type": "human_review", "depends_on": ["test"]},
    ],
}


def expected_manifest(origin: str = "user") -> Manifest:
    return Manifest(
        goal="ship it",
        agents={
            "coder": AgentSpec(prompt="Write code", tools=["read_file", "write_file"]),
            "tester": AgentSpec(prompt="Test code", tools=["run_tests"]),
        },
        steps=[
            ManifestStep(
                id="write", executor="llm", agent="coder", input="Write the module", origin=origin
            ),
            ManifestStep(
                id="merge",
                type="synthesis_gate",
                executor="llm",
                agent="tester",
                input="Combine {{write}}",
                depends_on=["write"],
                on_failure="retry",
                max_retries=2,
                checks=[CheckSpec(kind="predicate", expr="result == 1")],
                origin=origin,
            ),
            ManifestStep(
                id="test",
                executor="shell",
                command="pytest -q",
                depends_on=["write", "merge"],
                origin=origin,
            ),
            ManifestStep(
                id="approve",
                type="human_review",
                executor="human",
                depends_on=["test"],
                origin=origin,
            ),
        ],
    )


VARIANT_TASKS_CAMEL = {
    "mission": "ship it",
    "agents": [
        {"name": "coder", "systemPrompt": "Write code", "tools": ["read_file", "write_file"]},
        {"name": "tester", "prompt": "Test code", "tools": "run_tests"},
    ],
    "tasks": [
        {"id": "write", "agent": "coder", "task": "Write the module", "whatever": 1},
        {
            "taskId": "merge",
            "type": "Synthesis-Gate",
            "agent": "tester",
            "input": "Combine {{write}}",
            "dependsOn": "write",
            "onFailure": "RETRY",
            "maxRetries": "2",
            "verification": "result == 1",
        },
        {"id": "test", "cmd": "pytest -q", "requires": "write, merge"},
        {"id": "approve", "type": "human-review", "after": ["test"]},
    ],
}

VARIANT_WORKFLOW = {
    "goal": "ship it",
    "agents": {
        "coder": {"instructions": "Write code", "tools": ["read_file", "write_file"]},
        "tester": {"prompt": "Test code", "tools": ["run_tests"]},
    },
    "workflow": [
        {"id": "write", "agent": "coder", "input": "Write the module"},
        {
            "id": "merge",
            "type": "gate",
            "agent": "tester",
            "input": "Combine {{write}}",
            "needs": ["write"],
            "on_failure": "Retry",
            "retries": 2,
            "checks": "result == 1",
        },
        {"id": "test", "command": "pytest -q", "depends_on": ["write", "merge"]},
        {"id": "approve", "type": "Human Review", "depends": "test"},
    ],
}

VARIANT_STEP_MAPPING = {
    "plan": {
        "goal": "ship it",
        "agents": CANONICAL["agents"],
        "steps": {
            "write": {"agent": "coder", "input": "Write the module"},
            "merge": {
                "type": "synthesis_gate",
                "agent": "tester",
                "input": "Combine {{write}}",
                "depends_on": ["write"],
                "on_failure": "retry",
                "max_attempts": 3,
                "checks": [{"predicate": "result == 1"}],
            },
            "test": {"command": "pytest -q", "dependencies": ["write", "merge"]},
            "approve": {"type": "human_review", "depends_on": "test"},
        },
    }
}

VARIANT_WORKFLOW_WRAPPER = {
    "goal": "ship it",
    "agents": CANONICAL["agents"],
    "workflow": {"steps": CANONICAL["steps"]},
}


@pytest.mark.parametrize(
    "variant",
    [
        CANONICAL,
        VARIANT_TASKS_CAMEL,
        VARIANT_WORKFLOW,
        VARIANT_STEP_MAPPING,
        VARIANT_WORKFLOW_WRAPPER,
    ],
    ids=["canonical", "tasks-camel", "workflow", "step-mapping", "workflow-wrapper"],
)
def test_every_spelling_normalises_to_the_same_manifest(variant):
    assert load_manifest(variant, tools=TOOLS) == expected_manifest()


def _texts() -> dict[str, str]:
    as_json = json.dumps(VARIANT_TASKS_CAMEL)
    as_yaml = yaml.safe_dump(VARIANT_WORKFLOW, sort_keys=False)
    return {
        "json": as_json,
        "yaml": as_yaml,
        "fenced-json-with-prose": f"Sure! Here is the plan:\n\n```json\n{json.dumps(CANONICAL, indent=2)}\n```\n"
        "Let me know if you want changes.",
        "fenced-yaml": f"Plan below.\n```yaml\n{as_yaml}```\n",
        "untagged-fence": f"```\n{as_json}\n```",
        "unclosed-fence": f"```json\n{as_json}\n",
        "json-in-prose": f"Here is my plan: {as_json} Hope it helps.",
    }


@pytest.mark.parametrize("name", list(_texts()))
def test_text_sources_normalise_to_the_same_manifest(name):
    assert load_manifest(_texts()[name]) == expected_manifest()


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml", ".txt"])
def test_path_sources(tmp_path: Path, suffix):
    path = tmp_path / f"plan{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(CANONICAL))
    else:
        path.write_text(yaml.safe_dump(CANONICAL))
    assert load_manifest(path) == expected_manifest()


def test_missing_file_is_a_located_problem(tmp_path: Path):
    with pytest.raises(ManifestError) as err:
        load_manifest(tmp_path / "nope.yaml")
    assert "nope.yaml: cannot read" in str(err.value)


def test_bare_list_of_steps():
    manifest = load_manifest('[{"id": "a", "command": "make"}, {"id": "b", "after": "a"}]')
    assert [s.id for s in manifest.steps] == ["a", "b"]
    assert manifest.steps[1].depends_on == ["a"]
    assert manifest.agents == {}


@pytest.mark.parametrize(
    ("step", "executor"),
    [
        ({"type": "human_review"}, "human"),
        ({"type": "plan", "plan": {"steps": [{"id": "x", "command": "true"}]}}, "plan"),
        ({"plan": {"steps": [{"id": "x", "command": "true"}]}}, "plan"),
        ({"command": "make"}, "shell"),
        ({"function": "read_file"}, "python"),
        ({"input": "think"}, "llm"),
        ({"executor": "Bash", "command": "make"}, "shell"),
    ],
)
def test_executor_is_derived(step, executor):
    manifest = load_manifest({"steps": [{"id": "s", **step}]})
    assert manifest.steps[0].executor == executor


def test_executor_human_without_type_is_a_human_review():
    assert load_manifest({"steps": [{"id": "s", "executor": "human"}]}).steps[0].type == (
        "human_review"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("STOP", "halt_if_critical"),  # deprecated spelling
        ("Skip", "continue"),  # deprecated spelling
        ("halt", "halt_if_critical"),
        ("Halt_If_Critical", "halt_if_critical"),
        ("continue", "continue"),
        ("RePlan", "replan"),
    ],
)
def test_on_failure_any_case(value, expected):
    manifest = load_manifest({"steps": [{"id": "s", "command": "x", "on_failure": value}]})
    assert manifest.steps[0].on_failure == expected


def test_checks_as_strings_dicts_and_verification():
    manifest = load_manifest(
        {
            "steps": [
                {
                    "id": "s",
                    "command": "x",
                    "checks": ["result == 1", {"command": "pytest"}, {"expr": "result == 2"}],
                    "verification": "result != 3",
                }
            ]
        }
    )
    assert manifest.steps[0].checks == [
        CheckSpec(kind="predicate", expr="result == 1"),
        CheckSpec(kind="command", command="pytest"),
        CheckSpec(kind="predicate", expr="result == 2"),
        CheckSpec(kind="predicate", expr="result != 3"),
    ]


def test_max_retries_above_the_cap_is_clamped():
    manifest = load_manifest({"steps": [{"id": "s", "max_retries": 9}]})
    assert manifest.steps[0].max_retries == 5


def test_single_agent_is_implied_for_llm_tasks_only():
    manifest = load_manifest(
        {
            "agents": {"solo": "You do everything"},
            "steps": [
                {"id": "a", "input": "x"},
                {"id": "g", "type": "gate", "input": "{{a}}", "depends_on": "a"},
            ],
        }
    )
    assert manifest.agents["solo"].prompt == "You do everything"
    assert manifest.steps[0].agent == "solo"
    assert manifest.steps[1].agent is None


def test_llm_step_without_agent_is_fine_without_agents_but_not_among_several():
    assert load_manifest({"steps": [{"id": "a", "input": "x"}]}).steps[0].agent is None
    with pytest.raises(ManifestError) as err:
        load_manifest({"agents": {"p": "x", "q": "y"}, "steps": [{"id": "a", "input": "x"}]})
    assert "steps[0] (id 'a'): names no agent (agents: p, q)" in str(err.value)
    assert err.value.problems[0].rule == "unknown_agent"


# ------------------------------------------------------------------------------------------
# Rejections, each located


def rejection(source, **kwargs) -> ManifestError:
    with pytest.raises(ManifestError) as err:
        load_manifest(source, **kwargs)
    return err.value


def test_cycle_names_its_path():
    error = rejection(
        {
            "steps": [
                {"id": "a", "command": "x", "depends_on": ["c"]},
                {"id": "b", "command": "x", "depends_on": ["a"]},
                {"id": "c", "command": "x", "depends_on": ["b"]},
                {"id": "d", "command": "x"},
            ]
        }
    )
    assert [p.rule for p in error.problems] == ["cycle"]
    assert "cycle: a -> c -> b -> a" in str(error)
    assert set(error.problems[0].step_ids) == {"a", "b", "c"}


def test_self_dependency_is_a_cycle():
    error = rejection({"steps": [{"id": "a", "command": "x", "depends_on": "a"}]})
    assert "cycle: a -> a" in str(error)


def test_unknown_dependency():
    error = rejection(
        {
            "steps": [
                {"id": "a", "command": "x"},
                {"id": "b", "command": "x"},
                {"id": "build", "command": "x", "depends_on": ["a", "fetch"]},
            ]
        }
    )
    assert error.problems == [
        Problem(
            "missing_dependency",
            "steps[2] (id 'build'): depends_on names unknown step 'fetch'",
            ("build", "fetch"),
        )
    ]


def test_unknown_agent():
    error = rejection(
        {
            "agents": {"coder": "c", "tester": "t"},
            "steps": [{"id": "x", "agent": "writer", "input": "go"}],
        }
    )
    assert error.problems[0].rule == "unknown_agent"
    assert (
        error.problems[0].message
        == "steps[0] (id 'x'): unknown agent 'writer' (agents: coder, tester)"
    )


def test_unknown_tool_only_when_tools_are_given():
    source = {
        "agents": {"coder": {"prompt": "c", "tools": ["read_file", "browse"]}},
        "steps": [{"id": "x", "agent": "coder"}, {"id": "y", "function": "scrape"}],
    }
    load_manifest(source)  # no tool list: nothing to check against
    error = rejection(source, tools=TOOLS)
    assert [(p.rule, p.message) for p in error.problems] == [
        (
            "unknown_tool",
            "agents.coder: unknown tool 'browse' (tools: read_file, run_tests, write_file)",
        ),
        (
            "unknown_tool",
            "steps[1] (id 'y'): unknown function 'scrape' (tools: read_file, run_tests, write_file)",
        ),
    ]


def test_duplicate_id():
    error = rejection({"steps": [{"id": "a", "command": "x"}, {"id": "a", "command": "y"}]})
    assert error.problems == [
        Problem("duplicate_id", "steps[1]: duplicate id 'a' (first at steps[0])", ("a",))
    ]


def nested(levels: int) -> dict:
    """A manifest whose plan steps nest ``levels`` manifests deep (1 = no plan step)."""
    manifest: dict = {"steps": [{"id": "leaf", "command": "true"}]}
    for depth in range(levels - 1, 0, -1):
        manifest = {"steps": [{"id": f"p{depth}", "type": "plan", "plan": manifest}]}
    return manifest


def test_depth_three_is_accepted_and_four_rejected():
    load_manifest(nested(3))
    error = rejection(nested(4))
    assert error.problems == [
        Problem(
            "too_deep",
            "steps[0] (id 'p1').plan.steps[0] (id 'p2').plan.steps[0] (id 'p3').plan: "
            "nesting deeper than 3",
            ("p1", "p2", "p3"),
        )
    ]
    load_manifest(nested(4), max_depth=4)


def test_nested_problems_are_located_with_their_prefix():
    error = rejection(
        {
            "steps": [
                {
                    "id": "p",
                    "plan": {
                        "steps": [
                            {"id": "x", "command": "a", "depends_on": "y"},
                            {"id": "y", "command": "b", "depends_on": ["x", "zz"]},
                        ]
                    },
                }
            ]
        }
    )
    messages = [p.message for p in error.problems]
    assert messages == [
        "steps[0] (id 'p').plan.steps[1] (id 'y'): depends_on names unknown step 'zz'",
        "steps[0] (id 'p').plan: cycle: x -> y -> x",
    ]


def test_nested_plans_see_enclosing_agents():
    manifest = load_manifest(
        {
            "agents": {"coder": "c", "tester": "t"},
            "steps": [{"id": "p", "plan": {"steps": [{"id": "q", "agent": "tester"}]}}],
        }
    )
    assert manifest.steps[0].plan.steps[0].agent == "tester"


def test_every_problem_is_listed():
    error = rejection(
        {
            "agents": {"coder": "c"},
            "steps": [
                {"id": "a", "agent": "writer"},
                {"id": "a", "command": "x"},
                {"id": "b", "command": "x", "needs": "nope"},
            ],
        }
    )
    assert {p.rule for p in error.problems} == {
        "duplicate_id",
        "missing_dependency",
        "unknown_agent",
    }
    text = str(error)
    assert text.startswith("invalid manifest (3 problems):")
    for problem in error.problems:
        assert f"- {problem.message}" in text


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"steps": [{"id": "a", "max_retries": "many"}]},
            "steps[0] (id 'a').max_retries: Input should be a valid integer",
        ),
        (
            {"steps": [{"id": "a", "on_failure": "sometimes"}]},
            "steps[0] (id 'a').on_failure: Input should be 'halt_if_critical', 'continue', 'retry' or 'replan'",
        ),
        (
            {"steps": [{"id": "a", "type": "banana"}]},
            "steps[0] (id 'a').type: Input should be",
        ),
        ({"steps": [{"command": "x"}]}, "steps[0]: missing id"),
        ({"steps": ["just text"]}, "steps[0]: expected a mapping, got str"),
        (
            {"steps": [{"id": "a", "type": "plan"}]},
            "steps[0] (id 'a'): type 'plan' needs a nested 'plan'",
        ),
        (
            {"steps": [{"id": "a", "executor": "shell"}]},
            "steps[0] (id 'a'): shell step needs a 'command'",
        ),
        (
            {"steps": [{"id": "a", "executor": "python"}]},
            "steps[0] (id 'a'): python step needs a 'function'",
        ),
        (
            {"steps": [{"id": "a", "checks": [{"kind": "command"}]}]},
            "steps[0] (id 'a').checks[0]: a command check needs a non-empty 'command'",
        ),
        ({"agents": {"x": "y"}}, "manifest: no steps (expected 'steps', 'tasks' or 'workflow')"),
        ({"steps": []}, "manifest: no steps"),
        (
            {"steps": [{"id": "p", "plan": {"steps": [{"id": "q", "retries": "x"}]}}]},
            "steps[0] (id 'p').plan.steps[0] (id 'q').max_retries: Input should be a valid integer",
        ),
        ("steps: [\n  - id: a\n", "not valid YAML"),
        ('{"steps": [{"id": "a"', "not valid JSON"),
        ("no plan here, sorry", "manifest: no manifest found in the text"),
        (42, "manifest: expected text, a path or a mapping, got int"),
    ],
)
def test_invalid_manifests_are_located_problems(source, message):
    error = rejection(source)
    assert isinstance(error, ValueError)
    assert message in str(error)
    assert "Traceback" not in str(error)
    assert all(p.rule in {"invalid", "duplicate_id"} for p in error.problems)


# ------------------------------------------------------------------------------------------
# Origin


def with_origins(origin: str) -> dict:
    return {
        "steps": [
            {"id": "a", "command": "x", "origin": origin},
            {
                "id": "p",
                "plan": {"steps": [{"id": "q", "command": "y", "origin": origin}]},
                "origin": origin,
            },
        ]
    }


def _origins(manifest: Manifest) -> list[str]:
    out = []
    for step in manifest.steps:
        out.append(step.origin)
        if step.plan is not None:
            out += _origins(step.plan)
    return out


def test_origin_is_forced_on_every_step_including_nested():
    assert (
        _origins(load_manifest(json.dumps(with_origins("user")), origin="model")) == ["model"] * 3
    )
    assert _origins(load_manifest(with_origins("model"))) == ["user"] * 3


def test_drafts_are_model_written():
    draft = ManifestDraft(
        agents=[AgentDraft(name="coder", prompt="c", tools=["read_file"])],
        steps=[
            StepDraft(id="a", agent="coder", input="write"),
            StepDraft(id="b", command="pytest", depends_on=["a"], on_failure="retry"),
        ],
    )
    manifest = manifest_from_draft(draft, "the goal")
    assert manifest.goal == "the goal"
    assert manifest.agents == {"coder": AgentSpec(prompt="c", tools=["read_file"])}
    assert [s.origin for s in manifest.steps] == ["model", "model"]
    assert [s.executor for s in manifest.steps] == ["llm", "shell"]


def test_invalid_draft_raises():
    draft = ManifestDraft(steps=[StepDraft(id="a", depends_on=["ghost"])])
    with pytest.raises(
        ManifestError, match="steps\\[0\\] \\(id 'a'\\): depends_on names unknown step 'ghost'"
    ):
        manifest_from_draft(draft, "g")


def test_duplicate_agent_names_in_a_draft():
    draft = ManifestDraft(
        agents=[AgentDraft(name="c", prompt="1"), AgentDraft(name="c", prompt="2")],
        steps=[StepDraft(id="a", agent="c")],
    )
    with pytest.raises(
        ManifestError, match=r"agents\[1\]: duplicate agent name 'c' \(first at agents\[0\]\)"
    ):
        manifest_from_draft(draft, "g")


# ------------------------------------------------------------------------------------------
# Levels and downstream

DIAMOND = {
    "steps": [
        {"id": "a", "command": "x"},
        {"id": "c", "command": "x", "depends_on": "a"},
        {"id": "b", "command": "x", "depends_on": "a"},
        {"id": "d", "command": "x", "depends_on": ["b", "c"]},
        {"id": "e", "command": "x"},
    ]
}


def test_dependency_levels_of_a_diamond():
    assert dependency_levels(load_manifest(DIAMOND)) == [["a", "e"], ["c", "b"], ["d"]]


def test_dependency_levels_uses_the_highest_dependency():
    manifest = load_manifest(
        {
            "steps": [
                {"id": "a", "command": "x"},
                {"id": "b", "command": "x", "depends_on": "a"},
                {"id": "c", "command": "x", "depends_on": ["a", "b"]},
            ]
        }
    )
    assert dependency_levels(manifest) == [["a"], ["b"], ["c"]]


def test_dependency_levels_of_a_long_chain_listed_backwards():
    steps = [{"id": "s0", "command": "x"}]
    steps += [{"id": f"s{i}", "command": "x", "depends_on": f"s{i - 1}"} for i in range(1, 2000)]
    assert dependency_levels(load_manifest(steps[::-1])) == [[f"s{i}"] for i in range(2000)]


def test_dependency_levels_rejects_a_cycle():
    manifest = Manifest(
        steps=[
            ManifestStep(id="a", executor="shell", command="x", depends_on=["b"]),
            ManifestStep(id="b", executor="shell", command="x", depends_on=["a"]),
        ]
    )
    with pytest.raises(ManifestError, match="cycle: a -> b -> a"):
        dependency_levels(manifest)


@pytest.mark.parametrize(
    ("walk", "given", "expected"),
    [
        (downstream_of, ["a"], {"b", "c", "d"}),
        (downstream_of, ["b"], {"d"}),
        (downstream_of, ["b", "d"], set()),
        (downstream_of, ["d"], set()),
        (upstream_of, ["d"], {"a", "b", "c"}),
        (upstream_of, ["b"], {"a"}),
        (upstream_of, ["b", "a"], set()),
        (upstream_of, ["a"], set()),
        *[
            (walk, given, set())
            for walk in (downstream_of, upstream_of)
            for given in (["e"], ["ghost"])
        ],
    ],
)
def test_downstream_and_upstream_of_a_diamond(walk, given, expected):
    assert walk(load_manifest(DIAMOND), given) == expected


def test_upstream_of_walks_a_cycle_once_and_skips_unknown_dependencies():
    manifest = Manifest(
        steps=[
            ManifestStep(id="a", executor="shell", command="x", depends_on=["b", "ghost"]),
            ManifestStep(id="b", executor="shell", command="x", depends_on=["a"]),
            ManifestStep(id="c", executor="shell", command="x", depends_on=["b"]),
        ]
    )
    assert upstream_of(manifest, ["c"]) == {"a", "b"}
    assert upstream_of(manifest, ["a"]) == {"b"}


# ------------------------------------------------------------------------------------------
# Repairs

BEFORE = {
    "goal": "g",
    "agents": {"coder": "write code"},
    "steps": [
        {"id": "fetch", "agent": "coder", "input": "fetch it"},
        {"id": "parse", "agent": "coder", "input": "parse {{fetch}}", "depends_on": "fetch"},
        {"id": "report", "agent": "coder", "input": "report {{parse}}", "depends_on": "parse"},
        {"id": "side", "command": "make docs"},
    ],
}


def test_apply_repair_keeps_completed_steps_and_drops_a_colliding_repair_id():
    manifest = load_manifest(BEFORE)
    repair = RepairDraft(
        summary="parse differently",
        agents=[
            AgentDraft(name="coder", prompt="HIJACKED"),
            AgentDraft(name="parser", prompt="parse things"),
        ],
        steps=[
            StepDraft(id="fetch", agent="coder", input="REDO the fetch"),
            StepDraft(id="parse2", agent="parser", input="parse {{fetch}}", depends_on=["fetch"]),
            StepDraft(id="report", agent="coder", input="report {{parse2}}", depends_on=["parse2"]),
        ],
    )
    repaired = apply_repair(manifest, repair, replaced=["parse", "report"], kept=["fetch"])
    assert [s.id for s in repaired.steps] == ["fetch", "side", "parse2", "report"]
    assert repaired.step("fetch") == manifest.step("fetch")  # unchanged, still user-written
    assert repaired.step("side") == manifest.step("side")
    assert repaired.step("report").input == "report {{parse2}}"
    assert [repaired.step(s).origin for s in ("parse2", "report")] == ["model", "model"]
    assert repaired.agents["coder"].prompt == "write code"
    assert repaired.agents["parser"].prompt == "parse things"
    assert repaired.goal == "g"


def test_apply_repair_never_drops_a_kept_step():
    manifest = load_manifest(BEFORE)
    repair = RepairDraft(
        summary="s",
        steps=[StepDraft(id="parse", agent="coder", input="{{fetch}}", depends_on=["fetch"])],
    )
    repaired = apply_repair(manifest, repair, replaced=["fetch", "parse", "report"], kept=["fetch"])
    assert [s.id for s in repaired.steps] == ["fetch", "side", "parse"]
    assert repaired.step("fetch").origin == "user"


def test_apply_repair_rejects_an_invalid_result():
    manifest = load_manifest(BEFORE)
    repair = RepairDraft(
        summary="s",
        steps=[StepDraft(id="parse", agent="coder", depends_on=["ghost"])],
    )
    with pytest.raises(ManifestError, match="depends_on names unknown step 'ghost'"):
        apply_repair(manifest, repair, replaced=["parse"], kept=["fetch"])
    # "report" still depends on the replaced "parse" when the repair forgets it: not "parse2"
    repair = RepairDraft(summary="s", steps=[StepDraft(id="parse2", agent="coder")])
    with pytest.raises(
        ManifestError, match="steps\\[1\\] \\(id 'report'\\): depends_on names unknown step 'parse'"
    ):
        apply_repair(manifest, repair, replaced=["parse"], kept=["fetch"])


def test_manifest_problems_on_a_valid_manifest_is_empty():
    assert manifest_problems(expected_manifest(), tools=TOOLS) == []


def test_deprecated_on_failure_spellings_are_rewritten_wherever_a_step_is_validated():
    assert ManifestStep(id="s", executor="llm", on_failure="stop").on_failure == "halt_if_critical"
    assert ManifestStep(id="s", executor="llm", on_failure="skip").on_failure == "continue"
    assert StepDraft(id="s", on_failure="skip").on_failure == "continue"
    assert ManifestStep(id="s", executor="llm").on_failure == "halt_if_critical"


# -- reading limits: hostile manifests are refused, located, before anything recursive reads them

REPO = Path(__file__).resolve().parents[2]
HOSTILE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a bomb that expands dies here
from benchmarks import hostile_manifests as h
from veriloop.engines.plan.manifest import ManifestError, ManifestLimits, load_manifest

lists = []
deepest = lists
for _ in range(10_000):
    deepest.append([])
    deepest = deepest[0]
cases = {
    "alias_bomb": (h.alias_bomb(), ManifestLimits()),
    "alias_bomb_no_aliases": (h.alias_bomb(), ManifestLimits(max_aliases=0)),
    "lists_10k_text": (h.nested_lists(10_000), ManifestLimits()),
    "lists_10k_data": ({"steps": [{"id": "a", "command": "true", "input": lists}]}, ManifestLimits()),
    "yaml_block_1500": (h.yaml_block(1500), ManifestLimits()),
    "object_900": (json.loads(h.nested_objects(900)), ManifestLimits()),
    "fenced_lists_10k": ("```json\\n" + h.nested_lists(10_000) + "\\n```", ManifestLimits()),
    "prose_lists_10k": ("Here it is: " + h.nested_lists(10_000), ManifestLimits()),
    "shell_steps_1000": (h.chained_shell_steps(1000), ManifestLimits(max_steps=500)),
}
found = {}
for name, (source, limits) in cases.items():
    try:
        load_manifest(source, limits=limits)
        found[name] = None
    except ManifestError as exc:
        found[name] = [(p.rule, p.message) for p in exc.problems]
print(json.dumps(found))
"""


def test_hostile_manifests_are_refused_located_in_bounded_memory():
    """Each bomb of issue 29 is a ``too_large`` problem with a location, in a process that may
    not pass 1 GB (before the limits, the alias bomb took 14.6 GB and nesting a RecursionError)."""
    run = subprocess.run(
        [sys.executable, "-c", HOSTILE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout)
    where = {
        "alias_bomb": "manifest (line 6, column 14): more than 100000 values",  # a5 expanded
        "alias_bomb_no_aliases": "manifest (line 1, column 5): YAML anchors and aliases are not",
        "lists_10k_text": "manifest (line 1, column 116): lists and mappings nested deeper than 64",
        "lists_10k_data": "manifest at steps[0].input[0][0][0][0][0]...: lists and mappings nested",
        "yaml_block_1500": "manifest (line 5, column 129): lists and mappings nested deeper than 64",
        "object_900": "manifest at steps[0].input.a.a.a.a.a...: lists and mappings nested",
        "fenced_lists_10k": "manifest (```json block) (line 1, column 116): lists and mappings",
        "prose_lists_10k": "manifest (line 1, column 128): lists and mappings nested deeper",
        "shell_steps_1000": "steps: more than 500 steps in the manifest",
    }
    for name, start in where.items():
        assert found[name] is not None, f"{name} was accepted"
        [(rule, message)] = found[name]
        assert rule == "too_large" and message.startswith(start), (name, message)


def test_limits_leave_ordinary_manifests_alone():
    anchored = "defaults: &d {command: 'true'}\nsteps:\n  - {id: a, <<: *d}\n  - {id: b, <<: *d}\n"
    assert [s.command for s in load_manifest(anchored).steps] == ["true", "true"]
    error = rejection(anchored, limits=ManifestLimits(max_aliases=1))
    assert error.problems == [
        Problem("too_large", "manifest (line 4, column 17): more than 1 YAML aliases")
    ]
    # Nesting at the limit passes; one level more does not, whichever way the data comes.
    for depth, accepted in [(61, True), (62, False)]:  # 3 levels hold the step
        nested = "[" * depth + "]" * depth
        text = f"steps:\n  - id: a\n    command: 'true'\n    input: {nested}"
        data = {"steps": [{"id": "a", "command": "true", "input": json.loads(nested)}]}
        for source in (text, data):
            if accepted:
                load_manifest(source)
            else:
                assert rejection(source).problems[0].rule == "too_large"
    steps = {"steps": [{"id": f"s{i}", "command": "true"} for i in range(3)]}
    assert len(load_manifest(steps, limits=ManifestLimits(max_steps=3)).steps) == 3
    nested = {"steps": [{"id": "p", "plan": steps}]}
    problem = rejection(nested, limits=ManifestLimits(max_steps=3)).problems[0]
    assert problem.message == (
        "steps[0] (id 'p').plan.steps: more than 3 steps in the manifest "
        "(nested plans' steps included)"
    )
    # A structure that holds itself could never be stored: refused where it closes the loop.
    looped = "steps:\n  - id: a\n    command: 'true'\n    input: &x [1, *x]\n"
    assert rejection(looped).problems == [
        Problem(
            "too_large", "manifest (line 4, column 19): a YAML alias inside what its anchor names"
        )
    ]
    small = ManifestLimits(max_values=20)
    assert (
        "more than 20 values"
        in rejection({"steps": [{"id": "a", "input": list(range(30))}]}, limits=small)
        .problems[0]
        .message
    )
