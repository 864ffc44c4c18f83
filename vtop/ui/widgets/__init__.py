"""The widgets of the vtop screen, one per module."""
