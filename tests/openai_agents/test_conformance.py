"""The OpenAI Agents ``Session`` contract (``contextledger.testing.openai_agents``) on every backend."""

from __future__ import annotations

from contextledger.testing.openai_agents import OpenAISessionContract


class TestOpenAISessionContract(OpenAISessionContract):
    """Runs the OpenAI session contract against every backend."""
