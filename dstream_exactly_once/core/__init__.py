"""The source-agnostic exactly-once core: ranges, the source plug-in contract, and the pieces the engine and
the sources share (options, retry, progress, data-loss reports, the task planner).

It is the bottom layer: ``stores/`` build on its ranges, ``engine/`` (the committer, the error boundary, the
heartbeat) drives a batch over a store; nothing here imports either. Nothing in this package (nor in
``stores/`` or ``engine/``) imports a source: Kafka (``kafka/``) and append-only
files (``files/``) are plug-ins whose range modules register their range types here when imported.
"""
