"""The controller: its event loop, operations and topic deletion (reference §6)."""

from kctl.controller.controller import KafkaController

__all__ = ["KafkaController"]
