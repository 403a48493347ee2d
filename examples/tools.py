"""Plain typed functions for examples/python_steps.yaml, given to veriloop with
``--tools examples/tools.py:TOOLS`` (a file path) or ``--tools examples.tools:TOOLS`` (a module
importable from the current directory).

A python step calls its ``function`` with the step's ``input`` and, when the function has a
``depends`` parameter, the results of the steps it depends on. What it returns is the step's
result, which the step's predicates check.
"""

from __future__ import annotations


def word_stats(input: dict) -> dict:
    """Count the words of ``input["text"]`` and find the longest one."""
    words = str(input.get("text", "")).split()
    return {"words": len(words), "longest": max(words, key=len) if words else ""}


def fibonacci(input: dict) -> list[int]:
    """The first ``input["n"]`` Fibonacci numbers."""
    numbers = [0, 1]
    while len(numbers) < int(input["n"]):
        numbers.append(numbers[-1] + numbers[-2])
    return numbers[: int(input["n"])]


def combine(input: dict, depends: dict) -> dict:
    """The results of the steps this one depends on, side by side."""
    stats, fib = depends["word_stats"], depends["fibonacci"]
    return {"words": stats["words"], "longest": stats["longest"], "fib_sum": sum(fib)}


TOOLS = [word_stats, fibonacci, combine]
