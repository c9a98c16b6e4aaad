"""Rollout Studio: the Django project (persistence, permissions, presentation)."""
