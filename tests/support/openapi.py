"""Reading the served OpenAPI document in tests."""

from __future__ import annotations

from typing import Any


def deref(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follow a local $ref (one level is all the document uses outside schemas)."""
    while "$ref" in node:
        *_, section, name = node["$ref"].split("/")
        node = document["components"][section][name]
    return node


def operation(document: dict[str, Any], path: str) -> dict[str, Any]:
    """The GET operation of ``path``."""
    return document["paths"][path]["get"]
