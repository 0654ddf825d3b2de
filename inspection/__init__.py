"""Recorded streams: ``recording`` (reading JSON lines or raw SSE, detecting the
protocol), ``inspect`` (replaying one recording through the reference implementation and
every library adapter of its protocol, side by side) and ``render`` (that comparison for a
terminal and as HTML).

Role: incidents; an engineer brings a stream from production and sees who would have run
what.
"""
