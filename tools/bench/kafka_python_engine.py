"""Load any of the project's schemas into kafka-python 3's own schema-driven engine.

kafka-python reads ``<Name>.json`` through importlib.resources, so pointing it at the
project's schema folders (namespace packages) gives it exactly the messages kraftwire speaks,
including the controller APIs it does not ship.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def kafka_python_class(name: str, folder: str = "messages") -> type:
    from kafka.protocol.api_message import ApiMessage

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    package = importlib.import_module(f"schemas.{folder}")
    return type(name, (ApiMessage,), {}, load_json=package)
