"""The Kafka sink of the DStream API: transactional writes (:mod:`._transactional`), exported as
:class:`dstream_exactly_once.sinks.KafkaTransactionalSink`."""
