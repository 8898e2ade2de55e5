"""Marks shared by the farm tests."""

import pytest

# The shared farm runs on both brokers (tests/conftest.py). A test that is not
# about the broker (a page, a status code, what a poll answers) runs on the
# default one only: twice would test the same thing and cost the suite minutes.
one_broker = pytest.mark.parametrize("farm", ["memcached"], indirect=True)
