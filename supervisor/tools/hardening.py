"""Make nested argument types as strict as the top level.

A governed tool refuses undeclared arguments and lax coercion at every depth. Pydantic applies a
model's own config to nested models, so a user's ``BaseModel`` with the default ``extra="ignore"``
would silently drop unknown keys. We validate against derived subclasses that forbid extras and
use strict mode; validated values are still instances of the user's classes.
"""

from __future__ import annotations

import copy
import types
import typing
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict

_hardened: dict[type[BaseModel], type[BaseModel]] = {}
_in_progress: set[type[BaseModel]] = set()


def harden_annotation(annotation: Any) -> Any:
    """Return ``annotation`` with every nested ``BaseModel`` replaced by a strict subclass."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return harden_model(annotation)
    origin = get_origin(annotation)
    if origin is None:
        return annotation
    args = get_args(annotation)
    if origin is Annotated:
        inner = harden_annotation(args[0])
        if inner is args[0]:
            return annotation
        return Annotated[(inner, *annotation.__metadata__)]
    hardened_args = tuple(harden_annotation(arg) for arg in args)
    if all(new is old for new, old in zip(hardened_args, args, strict=True)):
        return annotation
    if origin in (Union, types.UnionType):
        return typing.Union[hardened_args]  # noqa: UP007 - built from a runtime tuple
    if origin is typing.Literal:
        return annotation
    try:
        return origin[hardened_args]
    except TypeError:
        return annotation


def harden_model(model: type[BaseModel]) -> type[BaseModel]:
    """A subclass of ``model`` with ``extra="forbid"`` and ``strict=True``, fields hardened too."""
    cached = _hardened.get(model)
    if cached is not None:
        return cached
    if model in _in_progress:
        # A recursive model: the inner reference keeps the original class.
        return model
    _in_progress.add(model)
    try:
        namespace: dict[str, Any] = {
            "__module__": model.__module__,
            "__qualname__": model.__qualname__,
            "__doc__": model.__doc__,
            "model_config": ConfigDict(**{**model.model_config, "extra": "forbid", "strict": True}),
        }
        annotations: dict[str, Any] = {}
        for name, info in model.model_fields.items():
            hardened = harden_annotation(info.annotation)
            if hardened is not info.annotation:
                annotations[name] = hardened
                field_copy = copy.copy(info)
                field_copy.annotation = hardened
                namespace[name] = field_copy
        namespace["__annotations__"] = annotations
        derived = type(model.__name__, (model,), namespace)
    finally:
        _in_progress.discard(model)
    _hardened[model] = derived
    return derived
