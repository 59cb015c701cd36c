"""kraftwire's kafka-storage: format and inspect a controller's log directories."""

from server.metalog.formatting import format_dirs

__all__ = ["format_dirs"]
