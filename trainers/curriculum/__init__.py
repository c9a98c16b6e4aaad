"""Spending rollouts where they teach: per-prompt statistics (`stats`), prompt samplers
(`samplers`) and rollout budgets (`budgets`), each sampler and budget a registry entry."""
