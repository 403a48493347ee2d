"""Nodes of the plan graph (graph/plan.py): thin wrappers over engines/plan."""
