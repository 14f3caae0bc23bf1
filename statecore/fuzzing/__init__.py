"""Stateful fuzzing of an implementation against a model.

`fuzz` runs the `guided` phase (model-chosen paths) and Hypothesis search,
with the `interpreter` driving an `statecore.adapter.Adapter` in lockstep
with the model, and `shrink` minimising what it finds; `pytest_plugin`
turns a fuzz run into a test of one's own suite; `coverage` reports which
lines and branches of the implementation a run reached; `workers` runs seeds
in parallel processes that share findings through a Hypothesis example
database (`finding_store`).
"""
