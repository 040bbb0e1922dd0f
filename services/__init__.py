"""Tribunal: reward services for reinforcement learning of language models."""
