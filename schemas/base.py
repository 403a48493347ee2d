"""Shared pydantic base classes: wire models speak camelCase, model outputs speak snake_case."""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A model that travels over HTTP and through graph state.

    JSON uses the extension protocol's camelCase names (``taskId``); Python
    uses snake_case. Both spellings are accepted on input.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=False,
        extra="ignore",
    )

    def to_wire(self) -> dict:
        """The camelCase JSON form sent to clients."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ModelOutput(BaseModel):
    """A structured output the model must return: strict, snake_case, no extra keys."""

    model_config = ConfigDict(extra="forbid")
