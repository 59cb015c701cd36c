"""Load any of the project's schemas into kafka-python 3's own schema-driven engine.

kafka-python reads ``<Name>.json`` through importlib.resources, so pointing it at the
project's schema folders (namespace packages) gives it exactly the messages kraftwire speaks,
including the controller APIs it does not ship.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def kafka_python_class(name: str, folder: str = "messages") -> type[Any]:
    """kafka-python's class for one of the project's schemas. Requests and responses are
    ApiMessages to kafka-python; metadata records are plain data, so they are built on ApiData
    with the schema's type read as "data"."""
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_message import ApiMessage

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    package = importlib.import_module(f"schemas.{folder}")
    if folder == "messages":
        return type(name, (ApiMessage,), {}, load_json=package)

    def as_data(metacls: type, schema: dict[str, Any]) -> dict[str, Any]:
        return {**schema, "type": "data"}

    return type(name, (ApiData,), {"json_patch": classmethod(as_data)}, load_json=package)
