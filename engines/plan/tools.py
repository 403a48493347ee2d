"""Tools for ``llm`` agents and callables for ``python`` steps, from what the user configured.

``PlanContext.tools`` may be None, an import path ``"module:attr"`` or
``"path/to/file.py:attr"`` (``attr`` a list or dict of tools, dotted attributes allowed), a list/tuple of LangChain
tools or plain typed Python functions (sync or async), or a dict name -> tool.
:func:`load_tools` keeps the objects as given (a python step calls the plain
function); :func:`as_langchain_tool` makes a LangChain tool of one when a model
is offered it, and :func:`openai_tool_schema` its OpenAI function-tool dict.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from veriloop.engines.plan.python_child import import_object

ToolLike = BaseTool | Callable[..., Any]


def load_tools(spec: Any) -> dict[str, ToolLike]:
    """Tools by name from ``spec`` (see the module docstring); ValueError for anything else."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        obj = import_object(spec)
        if isinstance(obj, str):
            raise ValueError(f"tools import path {spec!r} names a string, not tools")
        return load_tools(obj)
    if isinstance(spec, Mapping):
        tools: dict[str, ToolLike] = {}
        for name, obj in spec.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"tool names must be non-empty strings, got {name!r}")
            tools[name] = _checked(obj, name)
        return tools
    if isinstance(spec, list | tuple):
        tools = {}
        for obj in spec:
            name = tool_name(_checked(obj, repr(obj)))
            if name in tools:
                raise ValueError(f"two tools are named {name!r}")
            tools[name] = obj
        return tools
    if isinstance(spec, BaseTool) or callable(spec):
        return {tool_name(spec): spec}
    raise ValueError(
        f"tools must be None, 'module:attr', a list/tuple of tools or functions, or a dict "
        f"name -> tool; got {type(spec).__name__}"
    )


def tool_name(obj: ToolLike) -> str:
    """The name a tool is offered under: a LangChain tool's ``name``, a function's ``__name__``."""
    if isinstance(obj, BaseTool):
        return obj.name
    name = getattr(obj, "__name__", None) or getattr(getattr(obj, "func", None), "__name__", None)
    if not name or name == "<lambda>":
        raise ValueError(f"{obj!r} has no usable name; put it in a dict name -> tool")
    return name


def as_langchain_tool(obj: ToolLike, name: str | None = None) -> BaseTool:
    """``obj`` as a LangChain tool (renamed to ``name`` when given); typed functions, sync or async,
    become StructuredTools whose arguments schema comes from the type hints and whose description
    is the docstring."""
    if isinstance(obj, BaseTool):
        return obj if name is None or obj.name == name else obj.model_copy(update={"name": name})
    if not callable(obj):
        raise ValueError(f"{obj!r} is not a tool: expected a LangChain tool or a typed function")
    tool_label = name or tool_name(obj)
    description = inspect.getdoc(obj) or f"Call {tool_label}."
    if _is_async(obj):
        return StructuredTool.from_function(coroutine=obj, name=tool_label, description=description)
    return StructuredTool.from_function(func=obj, name=tool_label, description=description)


def openai_tool_schema(tool: ToolLike) -> dict[str, Any]:
    """The OpenAI function-tool dict (``{"type": "function", "function": {...}}``) of ``tool``."""
    return convert_to_openai_tool(as_langchain_tool(tool))


def _checked(obj: Any, label: str) -> ToolLike:
    if isinstance(obj, BaseTool) or callable(obj):
        return obj
    raise ValueError(
        f"tool {label}: {type(obj).__name__} is not a tool (expected a LangChain tool or a function)"
    )


def _is_async(obj: Any) -> bool:
    return inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(
        getattr(obj, "__call__", None)  # noqa: B004 - an instance with an async __call__
    )
