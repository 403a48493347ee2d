"""The judge: what decides whether a step did its work (checks, test runs and their reports, the
pre-step snapshots, the tamper scan). It never reads what the step could have written, except the
changes the step was allowed to make (DESIGN.md, Trust); how its processes are confined is
:mod:`veriloop.engines.plan.confinement`'s.
"""
