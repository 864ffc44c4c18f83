"""The rule engine: rules as data, evaluated over the store, ending in concrete knob changes."""
