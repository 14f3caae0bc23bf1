"""Traces: paths through a system, judged, replayed and stored.

`path` replays a list of actions on a system, `judge` judges properties
along a path (one wording for every verdict), `trace` is the one `Trace`
type, `replay` re-checks a trace, `itf` (with `itf_values`, `itf_json`,
`verify`) reads and writes ITF trace files, `regression` turns a trace into
a pytest test.
"""
