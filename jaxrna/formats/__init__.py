"""Output writers, one module per family of formats."""
