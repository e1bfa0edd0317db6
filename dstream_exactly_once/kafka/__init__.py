"""Kafka access: parameter translation, driver-side metadata and planning, executor-side reading."""
