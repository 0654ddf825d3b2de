"""Adapters that make an implementation certifiable: the reference implementation and
third-party client libraries."""
