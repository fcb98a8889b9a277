"""Fixtures: one 3-voter cell and one 3-node fabric for the session, each with agents
alice (supervisor of team ``crew``), bob and carol (members) and dave (no member)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

import whip_fabric
from servers import Servers

AGENTS = ("alice", "bob", "carol", "dave")


def _started(kind: str) -> Servers:
    servers = Servers(kind).start()
    servers.register(*AGENTS)
    servers.team("crew", "alice", "bob", "carol")
    return servers


@pytest.fixture(scope="session")
def cell() -> Iterator[Servers]:
    servers = _started("cell")
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def fabric() -> Iterator[Servers]:
    servers = _started("node")
    yield servers
    servers.stop()


@pytest.fixture(scope="session", params=["cell", "fabric"])
def servers(request: pytest.FixtureRequest) -> Servers:
    """Each test that takes it runs on the cell and on the fabric."""
    found: Servers = request.getfixturevalue(request.param)
    return found


async def client_of(servers: Servers, agent: str) -> whip_fabric.Client:
    return await whip_fabric.connect(
        servers.addrs, agent=agent, token=servers.token(agent), ca=servers.ca()
    )


@pytest.fixture
async def alice(servers: Servers) -> AsyncIterator[whip_fabric.Client]:
    client = await client_of(servers, "alice")
    yield client
    await client.close()


@pytest.fixture
async def bob(servers: Servers) -> AsyncIterator[whip_fabric.Client]:
    client = await client_of(servers, "bob")
    yield client
    await client.close()
