"""Transports carry requests between the controller and brokers (plugins: ``inprocess``, …)."""
