"""A twin of vLLM's V1 scheduler that serves real-format /metrics: demo, test bed, training."""
