"""Whether a server's input schema can go to the model: one the API refuses would fail every
call of every turn, since each one carries the whole tool list."""

from __future__ import annotations

from typing import Any

from jsonschema import SchemaError  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why the schema cannot be offered, in a few words; None when it can."""
    if schema.get("type") != "object":
        return 'its input schema is not of type "object"'
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as error:
        return f"its input schema is not valid JSON Schema: {error.message}"
    return None
