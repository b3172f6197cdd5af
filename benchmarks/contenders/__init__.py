"""The contenders: each a :class:`_protocol.Contender` that a worker process serves."""
