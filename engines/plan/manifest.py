"""Manifests: the lenient reading of what people and models write, and the structural rules.

Reading (:func:`load_manifest`, :func:`manifest_from_draft`, :func:`apply_repair`) turns YAML, JSON,
fenced JSON inside prose, a file or a mapping into a :class:`~veriloop.schemas.manifest.Manifest`,
accepting the spellings models and people actually use, then checks it with
:func:`manifest_problems` and raises :class:`ManifestError` listing every problem with its location
(``steps[2] (id 'build'): depends_on names unknown step 'fetch'``).

Rules that hold for every manifest, however it was written:

- ``origin`` is always the caller's ``origin`` argument, for every step including nested ones: a
  manifest can never mark its own steps as user-written.
- Dependencies name sibling steps of the same manifest; a nested plan's steps depend only on each
  other. Agents are visible in the manifest that defines them and in every plan nested inside it
  (the nearest definition wins).
- Depth 1 is the top-level manifest; the plan of a top-level plan step is depth 2, and so on.

Everything here is a pure function: no model, no graph, no IO except reading a given path.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from veriloop.schemas.manifest import MAX_RETRIES_CAP, AgentSpec, Manifest, ManifestStep
from veriloop.schemas.plan_outputs import ManifestDraft, RepairDraft

RULES = (
    "cycle",
    "missing_dependency",
    "duplicate_id",
    "unknown_agent",
    "unknown_tool",
    "too_deep",
    "too_large",
    "invalid",
)
"""Every rule a :class:`Problem` can name."""

DEFAULT_MAX_DEPTH = 3
_PARSE_DEPTH_LIMIT = 50
"""Normalisation stops here whatever ``max_depth`` says (a YAML anchor can make a plan contain itself)."""
_MAX_LISTED_NAMES = 10


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a manifest: the rule it breaks, a located message, the steps involved."""

    rule: str
    message: str
    step_ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.message


class ManifestError(ValueError):
    """A manifest that cannot run; ``problems`` holds every problem found, each located."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems: list[Problem] = list(problems)
        if len(self.problems) == 1:
            text = f"invalid manifest: {self.problems[0].message}"
        else:
            lines = "\n".join(f"- {p.message}" for p in self.problems)
            text = f"invalid manifest ({len(self.problems)} problems):\n{lines}"
        super().__init__(text)


@dataclass(frozen=True)
class ManifestLimits:
    """How much one manifest may take to read, checked before anything recursive sees it.

    Text is scanned first (JSON brackets, or YAML's event stream, both without recursion); data
    given as objects is walked iteratively. A manifest past a limit is refused with a located
    ``too_large`` problem, whatever else is wrong with it.
    """

    max_aliases: int = 64
    """YAML aliases (``*name``, merge keys included); 0 refuses anchors and aliases altogether."""
    max_nesting: int = 64
    """Levels of lists and mappings (a nested plan's steps sit three levels below its step)."""
    max_values: int = 100_000
    """Values (scalars, lists, mappings) with every YAML alias expanded: the size once read."""
    max_steps: int | None = None
    """Steps, nested plans' included; None: no limit."""


# --------------------------------------------------------------------------------------------
# Locations


def _step_loc(prefix: str, index: int, step_id: str | None) -> str:
    """``steps[2] (id 'build')`` under ``prefix`` (``""`` or ``"steps[0] (id 'p').plan."``)."""
    where = f"{prefix}steps[{index}]"
    return f"{where} (id '{step_id}')" if step_id else where


def _where(prefix: str) -> str:
    """The manifest-level location: ``""`` at the top, ``"steps[0] (id 'p').plan: "`` when nested."""
    return f"{prefix.rstrip('.')}: " if prefix else ""


def _names(names: Iterable[str]) -> str:
    listed = sorted(set(names))
    if not listed:
        return "none"
    shown = ", ".join(listed[:_MAX_LISTED_NAMES])
    return shown + (", ..." if len(listed) > _MAX_LISTED_NAMES else "")


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _validation_problems(
    error: ValidationError, where: str, step_ids: tuple[str, ...] = ()
) -> list[Problem]:
    """A pydantic error as located ``invalid`` problems (never a traceback)."""
    problems = []
    for item in error.errors(include_url=False):
        msg = item.get("msg", "invalid value")
        msg = msg.removeprefix("Value error, ")
        problems.append(Problem("invalid", f"{where}{_format_loc(item['loc'])}: {msg}", step_ids))
    return problems


# --------------------------------------------------------------------------------------------
# Reading text, files and fences

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_STEP_LIST_KEYS = ("steps", "tasks", "workflow")
_WRAPPER_KEYS = ("plan", "manifest")


def _json_error(exc: json.JSONDecodeError, origin: str) -> Problem:
    return Problem(
        "invalid", f"{origin}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
    )


def _yaml_error(exc: yaml.YAMLError, origin: str) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return Problem("invalid", f"{origin}: not valid YAML{where}: {problem}")


# --------------------------------------------------------------------------------------------
# Bounded reading: nothing recursive (json, yaml's composer, normalisation) sees data past a limit

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_MAX_EMBEDDED_TRIES = 64
"""Brackets in prose tried as the start of an embedded JSON manifest."""
_SHOWN_PATH_PARTS = 8


def _too_large(origin: str, where: str, what: str) -> ManifestError:
    return ManifestError([Problem("too_large", f"{origin}{where}: {what}")])


def _line_col(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    return f" (line {text.count(chr(10), 0, offset) + 1}, column {offset - line_start + 1})"


def _check_json_nesting(text: str, origin: str, limits: ManifestLimits) -> None:
    """Refuse JSON text nested deeper than the limit, scanning its brackets (strings skipped)."""
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limits.max_nesting:
                where = _line_col(text, match.start())
                raise _too_large(origin, where, _nesting_message(limits))
        elif token in "]}":
            depth = max(depth - 1, 0)


def _nesting_message(limits: ManifestLimits) -> str:
    return f"lists and mappings nested deeper than {limits.max_nesting} levels"


def _values_message(limits: ManifestLimits) -> str:
    return f"more than {limits.max_values} values once read (YAML aliases expanded)"


def load_json(text: str, *, origin: str, limits: ManifestLimits) -> Any:
    """JSON text as data, its nesting checked first (``json.loads`` recurses per level)."""
    if text.lstrip()[:1] in ("[", "{"):
        _check_json_nesting(text, origin, limits)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # a number past Python's 4300 digits
        raise ManifestError([_unreadable(exc, origin, "JSON")]) from None


def _unreadable(exc: ValueError, origin: str, language: str) -> Problem:
    """A value the parser's constructor refused (a 5000-digit number, a date with month 13)."""
    return Problem("invalid", f"{origin}: not valid {language}: {str(exc).split(';')[0]}")


def _check_yaml_events(text: str, origin: str, limits: ManifestLimits) -> None:
    """Refuse YAML past the limits from its event stream (yaml's parser is not recursive; its
    composer is): aliases counted, nesting measured, values counted with each alias worth the
    size of what its anchor names (an alias bomb is refused before it is expanded)."""
    aliases = values = 0
    sizes: dict[str, int] = {}
    open_collections: list[tuple[str | None, int]] = []  # (anchor, values before it)
    for event in yaml.parse(text, Loader=_YAML_LOADER):
        mark = event.start_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})"
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > limits.max_aliases:
                raise _too_large(origin, where, _alias_message(limits))
            if any(anchor == event.anchor for anchor, _ in open_collections):
                raise _too_large(origin, where, "a YAML alias inside what its anchor names")
            values += sizes.get(event.anchor, 1)  # an unknown one is yaml's error, found next
        elif isinstance(event, yaml.NodeEvent):
            if event.anchor is not None and limits.max_aliases == 0:
                raise _too_large(origin, where, _alias_message(limits))
            values += 1
            if isinstance(event, yaml.CollectionStartEvent):
                open_collections.append((event.anchor, values - 1))
                if len(open_collections) > limits.max_nesting:
                    raise _too_large(origin, where, _nesting_message(limits))
            elif event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, before = open_collections.pop()
            if anchor is not None:
                sizes[anchor] = values - before
        if values > limits.max_values:
            raise _too_large(origin, where, _values_message(limits))


def _alias_message(limits: ManifestLimits) -> str:
    if limits.max_aliases == 0:
        return "YAML anchors and aliases are not accepted here"
    return f"more than {limits.max_aliases} YAML aliases"


def load_yaml(text: str, *, origin: str, limits: ManifestLimits) -> Any:
    """YAML text as data, refused (``too_large``) past the limits before it is composed."""
    _check_yaml_events(text, origin, limits)
    try:
        return yaml.load(text, Loader=_YAML_LOADER)
    except ValueError as exc:  # a value it cannot build (month 13); a YAMLError is no ValueError
        raise ManifestError([_unreadable(exc, origin, "YAML")]) from None


def _check_data(data: Any, origin: str, limits: ManifestLimits) -> None:
    """Refuse already-parsed data past the limits, walking it without recursion (a shared or
    self-containing object counts each time it is reached, so the walk ends at the value limit)."""
    values = 0
    stack: list[tuple[Any, int, tuple]] = [(data, 1, ())]  # path as (key, parent path) pairs
    while stack:
        value, depth, path = stack.pop()
        values += 1
        if values > limits.max_values:
            raise _too_large(origin, _data_path(path), _values_message(limits))
        if isinstance(value, Mapping):
            children = value.items()
        elif isinstance(value, list | tuple):
            children = enumerate(value)
        else:
            continue
        if depth > limits.max_nesting:
            raise _too_large(origin, _data_path(path), _nesting_message(limits))
        stack.extend((child, depth + 1, (key, path)) for key, child in children)


def _data_path(path: tuple) -> str:
    parts: list[Any] = []
    while path:
        key, path = path
        parts.append(key)
    parts.reverse()
    shown = _format_loc(tuple(parts[:_SHOWN_PATH_PARTS]))
    return (
        f" at {shown.lstrip('.')}{'...' if len(parts) > _SHOWN_PATH_PARTS else ''}" if parts else ""
    )


# --------------------------------------------------------------------------------------------
# Reading text, files and fences


def looks_like_manifest(data: Any) -> bool:
    """Parsed YAML/JSON that is a manifest: a list of steps, or a mapping with a steps (or wrapper) key."""
    if isinstance(data, list):
        return bool(data) and all(isinstance(item, Mapping) for item in data)
    if isinstance(data, Mapping):
        keys = {_snake(k) for k in data if isinstance(k, str)}
        return bool(keys & {*_STEP_LIST_KEYS, *_WRAPPER_KEYS})
    return False


def _embedded_json(text: str) -> Any:
    """The first JSON object or array written inside prose, or None (the first few brackets tried;
    the text's nesting was checked, but a bracket inside a string may start a deeper decode)."""
    decoder = json.JSONDecoder()
    for match, _ in zip(re.finditer(r"[{\[]", text), range(_MAX_EMBEDDED_TRIES), strict=False):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):  # not JSON, too deep, or a number too long
            continue
        if looks_like_manifest(value):
            return value
    return None


def _parse_block(text: str, lang: str, origin: str, limits: ManifestLimits) -> Any:
    """A fenced block's content: JSON, else YAML (YAML reads most near-JSON too)."""
    try:
        return load_json(text, origin=origin, limits=limits)
    except json.JSONDecodeError as exc:
        json_problem = _json_error(exc, origin)
    try:
        return load_yaml(text, origin=origin, limits=limits)
    except yaml.YAMLError as exc:
        raise ManifestError(
            [json_problem if lang == "json" else _yaml_error(exc, origin)]
        ) from None


def parse_manifest_text(
    text: str, *, origin: str = "manifest", limits: ManifestLimits = ManifestLimits()
) -> Any:
    """The data a manifest text holds, before normalisation.

    Rule: a fenced code block wins (the first tagged json/yaml/yml, else the first block; an
    unclosed fence runs to the end of the text); otherwise the whole text as JSON, then as YAML
    when that gives a manifest-looking mapping or list, then the first manifest-looking JSON object
    embedded in prose. Anything else is an ``invalid`` problem; text past ``limits`` is a
    ``too_large`` one.
    """
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    if blocks:
        tagged = [b for b in blocks if b[0] in ("json", "yaml", "yml")]
        lang, body = (tagged or blocks)[0]
        return _parse_block(body, lang, f"{origin} (```{lang or ''} block)", limits)
    stripped = text.strip()
    if not stripped:
        raise ManifestError([Problem("invalid", f"{origin}: empty manifest text")])
    try:
        return load_json(stripped, origin=origin, limits=limits)
    except json.JSONDecodeError as exc:
        json_problem = _json_error(exc, origin)
    yaml_problem: Problem | None = None
    data: Any = None
    try:
        data = load_yaml(stripped, origin=origin, limits=limits)
    except yaml.YAMLError as exc:
        yaml_problem = _yaml_error(exc, origin)
    if looks_like_manifest(data):
        return data
    _check_json_nesting(stripped, origin, limits)
    embedded = _embedded_json(stripped)
    if embedded is not None:
        return embedded
    if isinstance(data, Mapping | list):
        return data
    if stripped[0] in "{[":
        raise ManifestError([json_problem])
    if yaml_problem is not None:
        raise ManifestError([yaml_problem])
    raise ManifestError([Problem("invalid", f"{origin}: no manifest found in the text")])


def read_manifest_data(
    source: Any, *, origin: str = "manifest", limits: ManifestLimits = ManifestLimits()
) -> Any:
    """The data a manifest source holds (text, a path, or parsed data), within ``limits``."""
    if isinstance(source, Mapping | list):
        _check_data(source, origin, limits)
        return source
    if isinstance(source, Path):
        try:
            text = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise ManifestError(
                [Problem("invalid", f"{source}: cannot read: {exc.strerror or exc}")]
            ) from None
        suffix = source.suffix.lower()
        if suffix == ".json":
            try:
                return load_json(text, origin=str(source), limits=limits)
            except json.JSONDecodeError as exc:
                raise ManifestError([_json_error(exc, str(source))]) from None
        if suffix in (".yaml", ".yml"):
            try:
                return load_yaml(text, origin=str(source), limits=limits)
            except yaml.YAMLError as exc:
                raise ManifestError([_yaml_error(exc, str(source))]) from None
        return parse_manifest_text(text, origin=str(source), limits=limits)
    if isinstance(source, str):
        return parse_manifest_text(source, origin=origin, limits=limits)
    raise ManifestError(
        [
            Problem(
                "invalid",
                f"{origin}: expected text, a path or a mapping, got {type(source).__name__}",
            )
        ]
    )


# --------------------------------------------------------------------------------------------
# Normalisation

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

_TYPE_ALIASES = {
    "task": "task",
    "step": "task",
    "action": "task",
    "agent": "task",
    "synthesis_gate": "synthesis_gate",
    "synthesis": "synthesis_gate",
    "synthesize": "synthesis_gate",
    "synthesise": "synthesis_gate",
    "gate": "synthesis_gate",
    "join": "synthesis_gate",
    "aggregate": "synthesis_gate",
    "human_review": "human_review",
    "human": "human_review",
    "review": "human_review",
    "human_approval": "human_review",
    "approval": "human_review",
    "manual_review": "human_review",
    "plan": "plan",
    "subplan": "plan",
    "sub_plan": "plan",
    "nested_plan": "plan",
    "sub_workflow": "plan",
    "workflow": "plan",
}
_EXECUTOR_ALIASES = {
    "llm": "llm",
    "agent": "llm",
    "model": "llm",
    "shell": "shell",
    "bash": "shell",
    "sh": "shell",
    "command": "shell",
    "cmd": "shell",
    "python": "python",
    "py": "python",
    "function": "python",
    "callable": "python",
    "plan": "plan",
    "human": "human",
    "person": "human",
}
_ON_FAILURE_ALIASES = {
    "halt_if_critical": "halt_if_critical",
    "stop": "halt_if_critical",
    "halt": "halt_if_critical",
    "abort": "halt_if_critical",
    "fail": "halt_if_critical",
    "error": "halt_if_critical",
    "continue": "continue",
    "skip": "continue",
    "ignore": "continue",
    "retry": "retry",
    "re_try": "retry",
    "replan": "replan",
    "re_plan": "replan",
}
_CHECK_KIND_ALIASES = {
    "predicate": "predicate",
    "expr": "predicate",
    "expression": "predicate",
    "verification": "predicate",
    "command": "command",
    "cmd": "command",
    "shell": "command",
    "test": "command",
}
_TRUE = {"true", "yes", "y", "on", "1"}
_FALSE = {"false", "no", "n", "off", "0"}


def _snake(key: str) -> str:
    """``dependsOn`` / ``depends-on`` / ``Depends On`` -> ``depends_on``."""
    key = _CAMEL_BOUNDARY.sub("_", key.strip())
    return re.sub(r"[\s\-]+", "_", key).lower()


def _snake_keys(raw: Mapping[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = _snake(key) if isinstance(key, str) else key
        out.setdefault(name, value)  # the first spelling wins when two collide
    return out


def _pick(data: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if data.get(name) is not None:
            return data[name]
    return None


def _word(value: Any) -> Any:
    """Lower-case, snake-cased spelling of an enum-like string (``Synthesis-Gate`` -> ``synthesis_gate``)."""
    if isinstance(value, str):
        return re.sub(r"[\s\-]+", "_", value.strip()).lower()
    return value


def _as_bool(value: Any) -> Any:
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return value


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return value


def _patterns(value: Any) -> Any:
    """Globs or test ids: a list, or one string (never split at commas: ``[a,b]`` is a glob)."""
    if isinstance(value, str):
        return [value]
    return value


def _str_list(value: Any) -> Any:
    """A list of names from a list, a single name, or a comma-separated string."""
    if value is None:
        return []
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [part for part in str(value).split(",")]
    if isinstance(value, list | tuple):
        out: list[Any] = []
        for item in value:
            if isinstance(item, Mapping):
                item = _pick(_snake_keys(item), "name", "id")
            if isinstance(item, int) and not isinstance(item, bool):
                item = str(item)
            if isinstance(item, str):
                item = item.strip()
                if not item or item in out:
                    continue
            out.append(item)
        return out
    return value


def _norm_check(raw: Any) -> Any:
    if isinstance(raw, str):
        return {"kind": "predicate", "expr": raw}
    if not isinstance(raw, Mapping):
        return raw
    data = _snake_keys(raw)
    kind = _word(_pick(data, "kind", "type"))
    kind = _CHECK_KIND_ALIASES.get(kind, kind) if isinstance(kind, str) else kind
    expr = _pick(data, "expr", "expression", "predicate", "verification", "condition", "check")
    command = _pick(data, "command", "cmd", "run")
    if kind is None:
        kind = "command" if command is not None and expr is None else "predicate"
    check: dict[str, Any] = {"kind": kind, "expr": expr, "command": command}
    for name, aliases in (
        ("description", ("description", "name")),
        ("timeout_s", ("timeout_s", "timeout", "timeout_seconds")),
    ):
        value = _pick(data, *aliases)
        if value is not None:
            check[name] = value
    return check


def _norm_checks(data: Mapping[str, Any]) -> list[Any]:
    """``checks`` (a predicate string, a dict or a list of both) plus ``verification`` predicates."""
    checks: list[Any] = []
    for key in ("checks", "check", "verification", "verify", "predicate", "predicates"):
        value = data.get(key)
        if value is None:
            continue
        items = value if isinstance(value, list | tuple) else [value]
        checks.extend(_norm_check(item) for item in items)
    return checks


def _norm_agent(raw: Any) -> Any:
    """An agent spec: a bare string is the prompt; tools may be one name or a list."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        return {"prompt": raw}
    if not isinstance(raw, Mapping):
        return raw
    data = _snake_keys(raw)
    spec: dict[str, Any] = {
        "prompt": _pick(data, "prompt", "system_prompt", "system", "instructions", "role") or "",
        "tools": _str_list(_pick(data, "tools", "tool")),
        "env": _str_list(data.get("env")),
    }
    model = _pick(data, "model", "llm")
    if model is not None:
        spec["model"] = model
    return spec


class _Reader:
    """One normalisation pass: collects problems while it builds the manifest."""

    def __init__(self, origin: str, max_steps: int | None = None):
        self.origin = origin
        self.problems: list[Problem] = []
        self.max_steps = max_steps
        self.steps_read = 0

    def manifest(
        self, raw: Any, prefix: str, depth: int, inherited: frozenset[str] = frozenset()
    ) -> Manifest:
        where = _where(prefix) or "manifest: "
        if isinstance(raw, list | tuple):
            raw = {"steps": list(raw)}
        if not isinstance(raw, Mapping):
            self.problems.append(
                Problem("invalid", f"{where}expected a mapping or a list of steps")
            )
            return Manifest()
        data = _snake_keys(raw)
        goal = _pick(data, "goal", "mission", "objective")
        agents_raw = data.get("agents")
        steps_raw = None
        for key in _STEP_LIST_KEYS:
            value = data.get(key)
            if isinstance(value, Mapping) and set(_snake_keys(value)) & set(_STEP_LIST_KEYS):
                return self._unwrap(value, data, prefix, depth, inherited)
            if value is not None:
                steps_raw = value
                break
        if steps_raw is None:
            for key in _WRAPPER_KEYS:
                value = data.get(key)
                if isinstance(value, Mapping | list):
                    return self._unwrap(value, data, prefix, depth, inherited)
            self.problems.append(
                Problem("invalid", f"{where}no steps (expected 'steps', 'tasks' or 'workflow')")
            )
            steps_raw = []
        agents = self.agents(agents_raw, prefix)
        visible = inherited | frozenset(agents)
        steps = self.steps(steps_raw, prefix, depth, visible)
        fields = {"goal": "" if goal is None else str(goal), "agents": agents, "steps": steps}
        sandbox = _word(data.get("sandbox"))
        if sandbox is not None:
            fields["sandbox"] = sandbox
        hidden = _patterns(data.get("hidden"))
        if hidden is not None:
            fields["hidden"] = hidden
        try:
            return Manifest.model_validate(fields)
        except ValidationError as exc:
            self.problems.extend(_validation_problems(exc, prefix.rstrip(".") or "manifest"))
            return Manifest(goal=fields["goal"], agents=agents, steps=steps)

    def _unwrap(
        self,
        inner: Any,
        outer: Mapping[str, Any],
        prefix: str,
        depth: int,
        inherited: frozenset[str],
    ) -> Manifest:
        """``{plan: {...}}`` / ``{workflow: {steps: ...}}``: the inner manifest, with the outer goal and agents."""
        if isinstance(inner, list):
            inner = {"steps": inner}
        merged = dict(_snake_keys(inner))
        for key in ("goal", "mission", "objective", "agents", "sandbox", "hidden"):
            if merged.get(key) is None and outer.get(key) is not None:
                merged[key] = outer[key]
        return self.manifest(merged, prefix, depth, inherited)

    def agents(self, raw: Any, prefix: str) -> dict[str, AgentSpec]:
        agents: dict[str, AgentSpec] = {}
        if raw is None:
            return agents
        entries: list[tuple[str, Any, str]] = []
        if isinstance(raw, Mapping):
            entries = [(str(name), spec, f"{prefix}agents.{name}") for name, spec in raw.items()]
        elif isinstance(raw, list | tuple):
            seen: dict[str, int] = {}
            for index, item in enumerate(raw):
                loc = f"{prefix}agents[{index}]"
                if isinstance(item, str):
                    item = {"name": item}
                if not isinstance(item, Mapping):
                    self.problems.append(Problem("invalid", f"{loc}: expected a mapping"))
                    continue
                data = _snake_keys(item)
                name = _pick(data, "name", "id", "agent")
                if name is None or not str(name).strip():
                    self.problems.append(Problem("invalid", f"{loc}: missing name"))
                    continue
                name = str(name).strip()
                if name in seen:
                    self.problems.append(
                        Problem(
                            "duplicate_id",
                            f"{loc}: duplicate agent name '{name}' "
                            f"(first at {prefix}agents[{seen[name]}])",
                        )
                    )
                    continue
                seen[name] = index
                entries.append((name, data, f"{prefix}agents.{name}"))
        else:
            self.problems.append(
                Problem("invalid", f"{prefix}agents: expected a mapping or a list of agents")
            )
            return agents
        for name, spec, loc in entries:
            try:
                agents[name] = AgentSpec.model_validate(_norm_agent(spec))
            except ValidationError as exc:
                self.problems.extend(_validation_problems(exc, loc))
        return agents

    def steps(
        self, raw: Any, prefix: str, depth: int, agent_names: frozenset[str]
    ) -> list[ManifestStep]:
        if isinstance(raw, Mapping):  # {id: spec, ...}
            items = []
            for key, spec in raw.items():
                if isinstance(spec, str):
                    spec = {"input": spec}
                if isinstance(spec, Mapping):
                    spec = {"id": key, **spec} if "id" not in spec else spec
                items.append(spec)
            raw = items
        if not isinstance(raw, list | tuple):
            self.problems.append(Problem("invalid", f"{prefix}steps: expected a list of steps"))
            return []
        self.steps_read += len(raw)
        if self.max_steps is not None and self.steps_read > self.max_steps:
            self.problems.append(
                Problem(
                    "too_large",
                    f"{prefix}steps: more than {self.max_steps} steps in the manifest "
                    "(nested plans' steps included)",
                )
            )
            return []
        steps = []
        for index, item in enumerate(raw):
            step = self.step(item, prefix, index, depth, agent_names)
            if step is not None:
                steps.append(step)
        return steps

    def step(
        self, raw: Any, prefix: str, index: int, depth: int, agent_names: frozenset[str]
    ) -> ManifestStep | None:
        if not isinstance(raw, Mapping):
            self.problems.append(
                Problem(
                    "invalid",
                    f"{_step_loc(prefix, index, None)}: expected a mapping, got {type(raw).__name__}",
                )
            )
            return None
        data = _snake_keys(raw)
        step_id = _pick(data, "id", "task_id", "step_id", "name")
        if isinstance(step_id, int | float) and not isinstance(step_id, bool):
            step_id = str(step_id)
        if isinstance(step_id, str):
            step_id = step_id.strip()
        loc = _step_loc(prefix, index, step_id if isinstance(step_id, str) else None)
        ids = (step_id,) if isinstance(step_id, str) and step_id else ()
        problems_before = len(self.problems)
        if not ids:
            self.problems.append(Problem("invalid", f"{loc}: missing id"))

        step_type = _word(_pick(data, "type", "step_type", "kind"))
        step_type = _TYPE_ALIASES.get(step_type, step_type) if isinstance(step_type, str) else None
        plan_raw = _pick(data, "plan", "subplan", "sub_plan")
        if step_type is None:
            step_type = "plan" if plan_raw is not None else "task"
        command = _pick(data, "command", "cmd", "shell", "run")
        function = _pick(data, "function", "callable", "fn")
        executor = _word(_pick(data, "executor", "runner"))
        if isinstance(executor, str):
            executor = _EXECUTOR_ALIASES.get(executor, executor)
            if _pick(data, "type", "step_type", "kind") is None:
                step_type = {"human": "human_review", "plan": "plan"}.get(executor, step_type)
        else:
            executor = self._derive_executor(step_type, command, function)

        agent = _pick(data, "agent", "agent_name", "assignee", "assigned_to")
        if agent is None and executor == "llm" and step_type == "task" and len(agent_names) == 1:
            (agent,) = agent_names  # the only agent in sight is the one meant

        on_failure = _word(
            _pick(data, "on_failure", "on_error", "on_fail", "on_verification_failure")
        )
        if isinstance(on_failure, str):
            on_failure = _ON_FAILURE_ALIASES.get(on_failure, on_failure)
        max_retries = _as_int(_pick(data, "max_retries", "retries", "retry"))
        if max_retries is None:
            attempts = _as_int(data.get("max_attempts"))
            if isinstance(attempts, int) and not isinstance(attempts, bool):
                max_retries = max(attempts - 1, 0)
        if isinstance(max_retries, int) and not isinstance(max_retries, bool):
            max_retries = min(max_retries, MAX_RETRIES_CAP)

        plan = None
        if plan_raw is not None:
            if depth >= _PARSE_DEPTH_LIMIT:
                self.problems.append(
                    Problem(
                        "too_deep", f"{loc}.plan: nesting deeper than {_PARSE_DEPTH_LIMIT}", ids
                    )
                )
            else:
                plan = self.manifest(plan_raw, f"{loc}.plan.", depth + 1, agent_names)

        fields: dict[str, Any] = {
            "id": step_id if ids else "?",
            "type": step_type,
            "executor": executor,
            "agent": agent,
            "input": _pick(
                data, "input", "task", "instructions", "instruction", "description", "prompt"
            ),
            "command": command,
            "function": function,
            "depends_on": _str_list(
                _pick(
                    data,
                    "depends_on",
                    "depends",
                    "dependencies",
                    "requires",
                    "after",
                    "needs",
                    "deps",
                )
            ),
            "on_failure": on_failure,
            "max_retries": max_retries,
            "critical": _as_bool(data.get("critical")),
            "requires_testing": _as_bool(_pick(data, "requires_testing", "requires_tests")),
            "test_command": _pick(data, "test_command", "test_cmd"),
            "writes_tests": _as_bool(data.get("writes_tests")),
            "writes": _patterns(data.get("writes")),
            "fail_to_pass": _patterns(data.get("fail_to_pass")),
            "pass_to_pass": _patterns(data.get("pass_to_pass")),
            "checks": _norm_checks(data),
            "output_schema": _pick(data, "output_schema", "schema", "output_json_schema"),
            "timeout_s": _pick(data, "timeout_s", "timeout", "timeout_seconds"),
            "env": _str_list(data.get("env")),
            "network": _as_bool(data.get("network")),
            "plan": plan,
            "origin": self.origin,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        try:
            step = ManifestStep.model_validate(fields)
        except ValidationError as exc:
            self.problems.extend(_validation_problems(exc, loc, ids))
            return None
        return step if len(self.problems) == problems_before else None

    @staticmethod
    def _derive_executor(step_type: Any, command: Any, function: Any) -> str:
        """human_review -> human, plan -> plan, a command -> shell, a function -> python, else llm."""
        if step_type == "human_review":
            return "human"
        if step_type == "plan":
            return "plan"
        if command is not None:
            return "shell"
        if function is not None:
            return "python"
        return "llm"


def _finish(reader: _Reader, manifest: Manifest, tools: Any, max_depth: int) -> Manifest:
    """Raise the reading problems if any, else the structural problems if any, else return.

    Reading problems (types, values, missing ids) come first because a step that could not be read
    is missing from the manifest, and structural rules would then report misleading locations
    and dependencies.
    """
    if reader.problems:
        raise ManifestError(reader.problems)
    problems = manifest_problems(manifest, tools=tools, max_depth=max_depth)
    if problems:
        raise ManifestError(problems)
    return manifest


def load_manifest(
    source: str | Path | Mapping[str, Any] | list[Any],
    *,
    origin: str = "user",
    tools: Collection[str] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    limits: ManifestLimits = ManifestLimits(),
) -> Manifest:
    """Read a manifest leniently, check it, and return it normalised (or raise :class:`ManifestError`).

    ``source``: YAML or JSON text (a fenced block inside prose is found, see
    :func:`parse_manifest_text`), a :class:`~pathlib.Path` (.json, .yaml/.yml, anything else read as
    text), or an already-parsed mapping / list of steps.

    Spellings accepted:

    - steps under ``steps`` / ``tasks`` / ``workflow`` (a list, or a mapping id -> step), a bare list
      of steps, or the whole manifest wrapped in ``plan:`` / ``manifest:``; ``goal`` / ``mission``.
    - agents as a mapping name -> spec or a list of ``{name, ...}``; a bare string spec is the
      prompt; ``tools`` one name or a list.
    - any key in camelCase or kebab-case; ``depends_on`` / ``requires`` / ``after`` / ``needs`` /
      ``depends`` / ``dependencies``, one name, a comma-separated string or a list.
    - ``type`` spellings such as ``synthesis-gate``, ``gate``, ``human-review``, ``subplan``; a step
      with a ``plan`` and no type is a plan step.
    - ``executor`` derived when absent: human_review -> human, plan -> plan, ``command`` -> shell,
      ``function`` -> python, otherwise llm.
    - ``on_failure`` in any case (``stop``/``halt``/``abort`` mean halt_if_critical,
      ``skip``/``ignore`` mean continue; ``stop`` and ``skip`` are deprecated spellings);
      ``max_retries`` above the cap is clamped to it; ``max_attempts`` n means n-1 retries.
    - ``checks`` as a predicate string, a mapping or a list of both; ``verification:`` (and
      ``verify``/``predicate``) adds predicates.
    - an llm task step with no agent, when exactly one agent is in sight, runs as that agent.
    - nested ``plan:`` read recursively with the same rules.

    Unknown keys are ignored. ``origin`` is forced on every step, nested ones included.

    ``limits`` bound the reading (:class:`ManifestLimits`): YAML aliases, nesting, values once
    read and steps; a manifest past one is a ``too_large`` problem, found before anything
    recursive reads it.
    """
    raw = read_manifest_data(source, limits=limits)
    reader = _Reader(origin, limits.max_steps)
    manifest = reader.manifest(raw, "", 1)
    return _finish(reader, manifest, tools, max_depth)


# --------------------------------------------------------------------------------------------
# Structural rules


def _first_index(steps: list[ManifestStep]) -> dict[str, int]:
    index: dict[str, int] = {}
    for i, step in enumerate(steps):
        index.setdefault(step.id, i)
    return index


def _find_cycles(steps: list[ManifestStep]) -> list[list[str]]:
    """Each distinct dependency cycle once, as a path ``[a, b, c, a]`` (a depends on b ...).

    A cycle starts at its member that comes first in the manifest.
    """
    index = _first_index(steps)
    deps = {
        s.id: [d for d in s.depends_on if d in index]
        for i, s in enumerate(steps)
        if index[s.id] == i
    }
    colour: dict[str, int] = {}  # 1 on the stack, 2 done
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for root in index:
        if colour.get(root):
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        # Where each id on the path stands: path.index scanned the whole path for every back
        # edge (quadratic in a long chain of self-dependencies).
        position = {root: 0}
        colour[root] = 1
        while stack:
            node, i = stack[-1]
            if i < len(deps[node]):
                stack[-1] = (node, i + 1)
                nxt = deps[node][i]
                state = colour.get(nxt, 0)
                if state == 0:
                    colour[nxt] = 1
                    stack.append((nxt, 0))
                    position[nxt] = len(path)
                    path.append(nxt)
                elif state == 1:
                    loop = path[position[nxt] :]
                    start = min(range(len(loop)), key=lambda k: index[loop[k]])
                    loop = loop[start:] + loop[:start]
                    if tuple(loop) not in seen:
                        seen.add(tuple(loop))
                        cycles.append(loop + [loop[0]])
            else:
                colour[node] = 2
                stack.pop()
                del position[path.pop()]
    return cycles


def _graph_problems(manifest: Manifest, prefix: str) -> list[Problem]:
    """duplicate_id, missing_dependency and cycle for one manifest level."""
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for i, step in enumerate(manifest.steps):
        if not step.id.strip():
            problems.append(Problem("invalid", f"{_step_loc(prefix, i, None)}: empty id"))
        elif step.id in first:
            problems.append(
                Problem(
                    "duplicate_id",
                    f"{prefix}steps[{i}]: duplicate id '{step.id}' "
                    f"(first at {prefix}steps[{first[step.id]}])",
                    (step.id,),
                )
            )
        else:
            first[step.id] = i
    for i, step in enumerate(manifest.steps):
        for dep in step.depends_on:
            if dep not in first:
                problems.append(
                    Problem(
                        "missing_dependency",
                        f"{_step_loc(prefix, i, step.id)}: depends_on names unknown step '{dep}'",
                        (step.id, dep),
                    )
                )
    for loop in _find_cycles(manifest.steps):
        problems.append(
            Problem("cycle", f"{_where(prefix)}cycle: {' -> '.join(loop)}", tuple(loop[:-1]))
        )
    return problems


def _step_problems(
    step: ManifestStep,
    loc: str,
    agents: Mapping[str, AgentSpec],
    tools: Collection[str] | None,
    agent_list: Callable[[], str],
    tool_list: Callable[[], str],
) -> list[Problem]:
    problems: list[Problem] = []
    ids = (step.id,)
    if (step.type == "plan") != (step.executor == "plan"):
        problems.append(
            Problem(
                "invalid",
                f"{loc}: type '{step.type}' does not go with executor '{step.executor}' "
                "(a nested plan needs both type and executor 'plan')",
                ids,
            )
        )
    if (step.type == "human_review") != (step.executor == "human"):
        problems.append(
            Problem(
                "invalid",
                f"{loc}: type '{step.type}' does not go with executor '{step.executor}' "
                "(a human review needs type 'human_review' and executor 'human')",
                ids,
            )
        )
    if step.type == "plan" and step.plan is None:
        problems.append(Problem("invalid", f"{loc}: type 'plan' needs a nested 'plan'", ids))
    if step.plan is not None and step.type != "plan":
        problems.append(
            Problem("invalid", f"{loc}: has a nested 'plan' but type '{step.type}'", ids)
        )
    if step.executor == "shell" and not (step.command or "").strip():
        problems.append(Problem("invalid", f"{loc}: shell step needs a 'command'", ids))
    if step.executor == "python":
        if not (step.function or "").strip():
            problems.append(Problem("invalid", f"{loc}: python step needs a 'function'", ids))
        elif tools is not None and step.function not in tools:
            problems.append(
                Problem(
                    "unknown_tool",
                    f"{loc}: unknown function '{step.function}' (tools: {tool_list()})",
                    ids,
                )
            )
    if step.executor == "llm":
        if step.agent is not None and step.agent not in agents:
            problems.append(
                Problem(
                    "unknown_agent",
                    f"{loc}: unknown agent '{step.agent}' (agents: {agent_list()})",
                    ids,
                )
            )
        elif step.agent is None and agents and step.type == "task":
            problems.append(
                Problem(
                    "unknown_agent",
                    f"{loc}: names no agent (agents: {agent_list()})",
                    ids,
                )
            )
    return problems


def _problems(
    manifest: Manifest,
    prefix: str,
    depth: int,
    inherited: Mapping[str, AgentSpec],
    tools: Collection[str] | None,
    tool_list: Callable[[], str],
    max_depth: int,
    path_ids: tuple[str, ...],
) -> list[Problem]:
    if depth > max_depth:
        return [Problem("too_deep", f"{_where(prefix)}nesting deeper than {max_depth}", path_ids)]
    problems = _graph_problems(manifest, prefix)
    if tools is not None:
        for name, spec in manifest.agents.items():
            for tool in spec.tools:
                if tool not in tools:
                    problems.append(
                        Problem(
                            "unknown_tool",
                            f"{prefix}agents.{name}: unknown tool '{tool}' (tools: {tool_list()})",
                        )
                    )
    agents = {**inherited, **manifest.agents}
    agent_list = cache(partial(_names, agents))
    for i, step in enumerate(manifest.steps):
        loc = _step_loc(prefix, i, step.id)
        problems.extend(_step_problems(step, loc, agents, tools, agent_list, tool_list))
        if step.plan is not None:
            problems.extend(
                _problems(
                    step.plan,
                    f"{loc}.plan.",
                    depth + 1,
                    agents,
                    tools,
                    tool_list,
                    max_depth,
                    path_ids + (step.id,),
                )
            )
    if not manifest.steps:
        problems.append(Problem("invalid", f"{_where(prefix) or 'manifest: '}no steps"))
    return problems


def manifest_problems(
    manifest: Manifest,
    *,
    tools: Collection[str] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> list[Problem]:
    """Every structural problem of a manifest, located, nested plans included.

    - duplicate_id: two steps of one manifest share an id (the first one counts).
    - missing_dependency: ``depends_on`` names no sibling step.
    - cycle: steps depend on each other in a loop; the message names the path
      (``cycle: a -> b -> a``: a depends on b, b on a), starting at the earliest step.
    - unknown_agent: an llm step names an agent not defined in its manifest or an enclosing one;
      or an llm *task* step names no agent while agents are defined. With no agents defined, an
      llm step without an agent runs on the context's model without tools; a synthesis gate
      without an agent is always fine (it only combines its dependencies' results).
    - unknown_tool (only when ``tools`` is given): an agent names a tool not in ``tools``, or a
      python step's ``function`` is not in it.
    - too_deep: a nested plan deeper than ``max_depth`` (the top-level manifest is depth 1).
    - invalid: an empty id; a manifest with no steps; type plan without a ``plan`` (or a ``plan``
      on another type); type plan / human_review with another executor (and the reverse); a
      shell step without ``command``; a python step without ``function``.
    """
    # The names a message lists are sorted once, when first needed (once per finding was
    # quadratic in a manifest of many steps naming unknown agents).
    tool_list = cache(partial(_names, tools or ()))
    return _problems(manifest, "", 1, {}, tools, tool_list, max_depth, ())


# --------------------------------------------------------------------------------------------
# Levels and downstream


def _lenient_levels(steps: list[ManifestStep]) -> tuple[list[list[str]], list[str]]:
    """Levels of the steps that have one, and the ids that have none (in or after a cycle).

    Unknown dependencies are ignored; a duplicate id counts once (its first step).
    """
    index = _first_index(steps)
    unique = [s for i, s in enumerate(steps) if index[s.id] == i]
    deps = {s.id: [d for d in dict.fromkeys(s.depends_on) if d in index] for s in unique}
    # Kahn's order, one pass over the edges (passes over the steps until none changed were
    # quadratic: a chain listed backwards levelled one step a pass).
    waiting = {sid: len(ds) for sid, ds in deps.items()}
    dependents: dict[str, list[str]] = {}
    for sid, ds in deps.items():
        for d in ds:
            dependents.setdefault(d, []).append(sid)
    ready = deque(sid for sid, n in waiting.items() if not n)
    level: dict[str, int] = {}
    while ready:
        sid = ready.popleft()
        level[sid] = 1 + max((level[d] for d in deps[sid]), default=-1)
        for child in dependents.get(sid, ()):
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    levels: list[list[str]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for step in unique:
        if step.id in level:
            levels[level[step.id]].append(step.id)
    return levels, [s.id for s in unique if s.id not in level]


def dependency_levels(manifest: Manifest) -> list[list[str]]:
    """The top-level steps grouped by dependency level, each level in manifest order.

    Level 0 holds the steps with no dependencies; a step's level is one more than the highest level
    among its dependencies. Steps of one level may run in parallel. Raises :class:`ManifestError`
    for a duplicate id, an unknown dependency or a cycle.
    """
    problems = _graph_problems(manifest, "")
    if problems:
        raise ManifestError(problems)
    levels, _ = _lenient_levels(manifest.steps)
    return levels


def dependents_of(manifest: Manifest) -> dict[str, list[str]]:
    """step id -> the top-level steps that name it in ``depends_on``, in manifest order."""
    dependents: dict[str, list[str]] = {}
    for step in manifest.steps:
        for dep in step.depends_on:
            dependents.setdefault(dep, []).append(step.id)
    return dependents


def downstream_of(manifest: Manifest, step_ids: Iterable[str]) -> set[str]:
    """Every top-level step that depends, directly or transitively, on one of ``step_ids``.

    The given ids themselves are never included, even when one depends on another. Unknown ids
    contribute nothing; a dependency cycle is walked once.
    """
    return _reached(dependents_of(manifest), step_ids)


def upstream_of(manifest: Manifest, step_ids: Iterable[str]) -> set[str]:
    """Every top-level step that one of ``step_ids`` depends on, directly or transitively.

    The given ids themselves are never included, even when one depends on another. Unknown ids,
    given or depended on, contribute nothing; a dependency cycle is walked once.
    """
    known = {step.id for step in manifest.steps}
    dependencies: dict[str, list[str]] = {}
    for step in manifest.steps:
        dependencies.setdefault(step.id, []).extend(d for d in step.depends_on if d in known)
    return _reached(dependencies, step_ids)


def _reached(edges: Mapping[str, list[str]], start: Iterable[str]) -> set[str]:
    """The ids reached from ``start`` along ``edges`` in one or more hops, less ``start``."""
    given = set(start)
    seen: set[str] = set()
    frontier = list(given)
    while frontier:
        current = frontier.pop()
        for child in edges.get(current, ()):
            if child not in seen:
                seen.add(child)
                frontier.append(child)
    return seen - given


# --------------------------------------------------------------------------------------------
# Drafts and repairs


def manifest_from_draft(
    draft: ManifestDraft,
    goal: str,
    *,
    tools: Collection[str] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Manifest:
    """The meta-planner's draft as a checked manifest for ``goal``; every step's origin is "model"."""
    raw = draft.model_dump(mode="json")
    raw["goal"] = goal
    reader = _Reader("model")
    manifest = reader.manifest(raw, "", 1)
    return _finish(reader, manifest, tools, max_depth)


def apply_repair(
    manifest: Manifest,
    repair: RepairDraft,
    *,
    replaced: Collection[str],
    kept: Collection[str],
    tools: Collection[str] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Manifest:
    """The manifest after a replan, checked (or :class:`ManifestError`).

    - Every top-level step not in ``replaced`` stays exactly as it was, in place; a step in
      ``kept`` (a completed result) always stays, even if it is also listed in ``replaced``.
    - The repair's steps follow, with origin "model". A repair step whose id is the id of a step
      that stays is dropped: the existing step wins (its completed result is reused, skip-if-present).
    - A repair step that reuses a replaced step's id keeps that step's contract: its checks, output
      schema, test command, ``requires_testing: true``, ``critical`` and ``writes_tests`` (a model
      may change how a step works, never weaken what it must pass).
    - The repair's agents are added; an existing agent name keeps its existing definition.
    - The goal is unchanged.
    """
    replaced_ids = set(replaced) - set(kept)
    survivors = [step for step in manifest.steps if step.id not in replaced_ids]
    surviving_ids = {step.id for step in survivors}

    reader = _Reader("model")
    raw = repair.model_dump(mode="json")
    agents = {**reader.agents(raw.get("agents") or [], "repair."), **manifest.agents}
    visible = frozenset(agents)
    new_steps = []
    for index, item in enumerate(raw.get("steps") or []):
        if item.get("id") in surviving_ids:
            continue
        step = reader.step(item, "repair.", index, 1, visible)
        if step is not None:
            new_steps.append(step)
    originals = {step.id: step for step in manifest.steps if step.id in replaced_ids}
    new_steps = [
        _keep_contract(originals[step.id], step) if step.id in originals else step
        for step in new_steps
    ]
    # model_copy: the manifest's other settings (its sandbox) survive a replan.
    merged = manifest.model_copy(update={"agents": agents, "steps": [*survivors, *new_steps]})
    return _finish(reader, merged, tools, max_depth)


def _keep_contract(original: ManifestStep, repaired: ManifestStep) -> ManifestStep:
    """``repaired`` with every check and guarantee of the step it replaces (stricter wins)."""
    return repaired.model_copy(
        update={
            "checks": [*original.checks, *(c for c in repaired.checks if c not in original.checks)],
            "output_schema": original.output_schema or repaired.output_schema,
            "test_command": original.test_command or repaired.test_command,
            "requires_testing": True
            if original.requires_testing or repaired.requires_testing
            else repaired.requires_testing,
            "critical": original.critical or repaired.critical,
            "writes_tests": original.writes_tests,
            "writes": original.writes,
            "fail_to_pass": original.fail_to_pass,
            "pass_to_pass": original.pass_to_pass,
        }
    )
