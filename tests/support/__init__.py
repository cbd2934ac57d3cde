"""What the test modules share: facts about the sample, oracles, clients and processes.

Test modules import from here, never from one another or from conftest.py (which holds
fixtures only); tests/test_layout.py enforces that.
"""
