"""The benchmark's parts (experiments/bench/benchmark.py runs them): draws, memory, modern (the modern ranker's ladder and
shared timing helpers), roofline."""
