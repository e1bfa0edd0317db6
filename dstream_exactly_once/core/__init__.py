"""The source-agnostic exactly-once core: ranges, the source plug-in contract, the committer.

Nothing in this package (nor in ``stores/``) imports a source: Kafka (``kafka/``) and append-only
files (``files/``) are plug-ins whose range modules register their range types here when imported.
"""
