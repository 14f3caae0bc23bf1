"""Diagrams and generated documentation.

`diagram` draws machines and systems as Mermaid (`mermaid`) or Graphviz
(`dot`, rendered by `graphviz`), with traces drawn on them (`overlay`) and
system `overview`s; `diagram_diff` draws what a change does; `docgen` and
`diagram_doc` write the generated pages under ``docs/``.
"""
