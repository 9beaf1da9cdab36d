"""Turning what a tool returned into JSON data for the model, or a typed refusal.

Pydantic models are dumped in JSON mode, dataclasses field by field, tuples become lists. Anything
else that is not JSON data (sets, bytes, datetimes outside a model, arbitrary objects, NaN) is
refused; a value is never silently passed through ``str()``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pydantic import BaseModel


class NotSerializable(ValueError):
    """The value at ``path`` is not JSON data."""

    def __init__(self, path: str, type_name: str) -> None:
        self.path = path
        self.type_name = type_name
        super().__init__(f"{path} is a {type_name}, which is not JSON data")


def to_json_value(value: Any, path: str = "$") -> Any:
    """Return ``value`` as JSON data (dict/list/str/int/float/bool/None).

    Raises:
        NotSerializable: with the path of the first offending value.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict and is_flat_json_object(value):
        return value  # already JSON data; returned as is (never mutated)
    if isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise NotSerializable(path, f"non-finite float ({value!r})")
        return value
    if isinstance(value, BaseModel):
        return to_json_value(value.model_dump(mode="json"), path)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: to_json_value(getattr(value, field.name), f"{path}.{field.name}")
            for field in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSerializable(f"{path}[{key!r}]", f"key of type {type(key).__name__}")
            result[key] = to_json_value(item, f"{path}.{key}")
        return result
    if isinstance(value, (list, tuple)):
        return [to_json_value(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise NotSerializable(path, type(value).__name__)


def is_flat_json_object(value: dict[Any, Any]) -> bool:
    """Whether every key is a string and every value a string, int, bool or None."""
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if not (kind is str or kind is int or kind is bool or item is None):
            return False
    return True
