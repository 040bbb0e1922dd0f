"""Queue backends (Redis Streams, embedded) behind the ``JobQueue`` interface of ``base``."""
