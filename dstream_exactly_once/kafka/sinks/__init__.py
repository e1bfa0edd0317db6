"""The Kafka sink of the DStream API: transactional writes (:mod:`.transactional`), exported as
:class:`dstream_exactly_once.sinks.KafkaTransactionalSink`."""
