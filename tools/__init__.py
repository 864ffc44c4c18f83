"""Tools for developing vtop that are not part of it: the real vLLM CPU server harness."""
