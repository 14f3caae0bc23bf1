"""Exhaustive checking: every reachable state of a bounded model.

`explore` (breadth-first search with the successor memo of `stepcache` and
the symmetry reduction of `symmetry`, checked while it runs by
`symmetry_guard`), its `results`, `counterexample` paths, model `mutation`
and spec `adequacy`, and `symbolic` checking of single machines.
"""
