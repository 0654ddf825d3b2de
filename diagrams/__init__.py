"""All graphviz rendering, from data: the lifecycle and state graph (``model``), the
system rules (``rules``), the coverage heat map (``coverage``), sequence diagrams of one
run (``sequence``) and the shared look (``style``).

Role: drawing. Why a floor of its own: the same drawings serve the design review, the
HTML report and the notebooks, and each is generated from the table or from a trace, never
drawn by hand. Imports only :mod:`callsafe.model` and :mod:`callsafe.formal`.
"""
