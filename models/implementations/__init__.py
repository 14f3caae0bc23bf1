"""Reference implementations: the code the models say vLLM-Omni should run.

Each is plain Python a vLLM-Omni module could adopt (`request_state`: the
fenced ``RequestStateAccessor``; `stream_edge`: ``StreamEdgeRecorder``), and
each is fuzzed against its model through a binding in
`statecore.models.bindings`.
"""
