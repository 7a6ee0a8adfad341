"""Test support for people who test deciders, ours or their own: Hypothesis strategies that
build valid worlds and logs, a scripted world, and the equivalence harness.

Hypothesis is imported only here and comes with the `test` extra; nothing in the product
imports this package.
"""
