"""Example code for dmalab (importable from the repository root)."""
