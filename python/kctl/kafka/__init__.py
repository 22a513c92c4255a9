"""Kafka's own wire protocol, for kctl as the controller of real Kafka brokers: the codec
(:mod:`kctl.kafka.protocol`) and kctl's messages mapped to and from it (:mod:`kctl.kafka.messages`)."""
