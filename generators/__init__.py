"""Adversarial abstract traces: the named catalog, bounded exhaustive exploration,
coverage suites from the state graph, z3 synthesis and hypothesis strategies."""
