"""Fakes for what cannot run on a test machine: only NVML (no GPU here), never vLLM or HTTP.

Each fake sits as low as it can so that the real library above it runs unchanged: the NVML
fake replaces the C library under the real `pynvml` module, not `pynvml` itself.
"""
