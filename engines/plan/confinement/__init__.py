"""Confinement: how a step's process starts (user, capabilities, seccomp, paths, limits) and ends.

Nothing here judges a step; the judge (:mod:`veriloop.engines.plan.judge`) runs its checks and
tests through :func:`~veriloop.engines.plan.confinement.process.run_command` like any step process.
"""
