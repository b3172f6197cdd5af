"""Thin adapters between agent frameworks and the ledger.

Each integration translates a host's messages and events into
:class:`~contextledger.Conversation` calls and back; no business rule lives here.
Import the one you need (e.g. :mod:`contextledger.integrations.strands`); each needs its
framework installed.
"""
