import pytest

from .helpers import Server


@pytest.fixture
def hello():
    """The hello example plugin served alone over stdio."""
    with Server("--plugin", "hello") as srv:
        yield srv
