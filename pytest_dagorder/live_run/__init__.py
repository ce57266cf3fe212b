"""The run as it goes: outcomes, skips, published values, and what it writes at the end."""
