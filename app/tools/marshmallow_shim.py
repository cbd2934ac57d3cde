"""The one module that calls a marshmallow field's ``_deserialize`` directly, and why.

``Record.quick_load`` (app/tools/fixture_format.py) checks a plainly valid record field
by field, skipping marshmallow's per-record machinery, which is most of a load's cost.
For a present, non-null value, ``Field.deserialize`` is ``_deserialize`` (the method a
custom field implements) followed by the field's validators; a field without
validators can skip straight to ``_deserialize``. ``check_private_api`` runs at import
(and in tests/test_shims.py) and pyproject.toml caps marshmallow below 4: if
``deserialize`` stops being that, the upgrade fails at once instead of quick_load
quietly accepting what ``load`` refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from marshmallow import fields


def check_private_api(field: type[Any] = fields.Field) -> None:
    """Fail with one clear error if ``deserialize`` no longer runs ``_deserialize``."""
    deserialize = getattr(field, "deserialize", None)
    names = deserialize.__code__.co_names if callable(deserialize) else ()
    missing = [name for name in ("_deserialize", "_validate") if name not in names]
    if not callable(getattr(field, "_deserialize", None)) and "_deserialize" not in missing:
        missing.append("_deserialize")
    if missing:
        raise RuntimeError(
            f"marshmallow {version('marshmallow')} Field.deserialize lacks "
            f"{', '.join(f'Field.{name}' for name in missing)}: "
            "update app/tools/marshmallow_shim.py"
        )


check_private_api()


def value_loader(field: fields.Field) -> Callable[[Any, str, Any], Any]:
    """What checks a present, non-null value exactly as ``field.deserialize`` would."""
    if field.validators:
        return field.deserialize
    return field._deserialize
