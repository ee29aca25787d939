import pytest

from .helpers import Server

#: Both HTTP servers run the HTTP test modules: mcpkit's own (the default) and hypercorn.
HTTP_SERVERS = ("mcpkit", "hypercorn")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "http_server_kind" in metafunc.fixturenames:
        metafunc.parametrize("http_server_kind", HTTP_SERVERS, indirect=True, scope="module")


@pytest.fixture(scope="module")
def http_server_kind(request: pytest.FixtureRequest):
    """Which server `mcpkit serve --transport http` runs for this module's tests."""
    patch = pytest.MonkeyPatch()
    patch.setenv("MCPKIT_HTTP_SERVER", request.param)
    yield request.param
    patch.undo()


@pytest.fixture
def hello():
    """The hello example plugin served alone over stdio."""
    with Server("--plugin", "hello") as srv:
        yield srv
