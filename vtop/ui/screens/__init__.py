"""The screens pushed over the dashboard: help, explain, finding detail, engines."""
