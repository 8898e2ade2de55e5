"""Job types: what a kind of long job is (base); the registry finds one by
name (progress.registry).
"""
