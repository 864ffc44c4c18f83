"""The real vLLM CPU server: set-up, start, load shapes and captures (see docs and setup.sh)."""
