"""Benchmarks (not tests): each script starts its own real servers and prints a Markdown table."""
