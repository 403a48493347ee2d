"""A python step function registered as a LangChain tool (``@tool`` replaces the module's name
with the tool): the child process calls the function inside."""

from langchain_core.tools import tool


@tool
def shout(text: str) -> str:
    """Shout text."""
    return text.upper()
