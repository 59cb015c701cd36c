"""Helpers shared by test modules: controllers and clusters built in-process, wire clients and
their checks. Test modules import from here, never from one another."""
