"""Where frames come from: the vLLM scraper, NVML, the host, configuration discovery."""
