"""Test and benchmark helpers of the judge: items from the seed data (``seed_data``).

The scripted OpenAI-compatible server the judge is tested against is generic:
``tribunal.llm.testing``.
"""
