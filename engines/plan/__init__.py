"""Engines of the plan graph: manifests, the critic, executors, checks, the fix loop, policies, replanning."""
