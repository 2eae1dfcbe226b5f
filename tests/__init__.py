"""The test suite. Its tiers are folders of test modules; ``tests.support`` is the helpers' package."""
