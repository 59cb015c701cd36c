"""This controller's registration (KIP-919), as Kafka's ControllerRegistrationManager keeps it.

Every controller of a cluster at metadata.version 3.7-IV0 or later has a RegisterControllerRecord
with its listeners and supported features: Kafka's controllers list the registered controllers
in DescribeCluster, and an admin client bootstrapped at a Kafka controller finds the leader only
among them. The active controller registers itself; a standby sends ControllerRegistration to
the active one, again after each leader change, until the metadata holds this incarnation.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from protocol.error_codes import Error
from protocol.generated.messages.controller_registration_request import (
    ControllerRegistrationRequest, Feature, Listener)
from protocol.primitives import random_uuid
from server.client_connection import ConnectionLost, KafkaConnection
from server.controller.cluster import Endpoint
from server.controller.features import SUPPORTED_FEATURES
from server.controller.quorum_controller import Applied, QuorumController
from server.security.client import ClientSecurity

log = logging.getLogger("kraftwire.registration")

MV_3_7_IV0 = 15  # the first metadata.version with controller registrations
RETRY_S = 2.0


class ControllerRegistrar:
    def __init__(self, node_id: int, endpoint: Endpoint, security: ClientSecurity, timeout_s: float) -> None:
        self.node_id = node_id
        self.endpoint = endpoint
        self.security = security
        self.timeout_s = timeout_s
        self.incarnation = random_uuid()
        self._task: asyncio.Task[None] | None = None

    def request(self) -> ControllerRegistrationRequest:
        e = self.endpoint
        return ControllerRegistrationRequest(
            controller_id=self.node_id, incarnation_id=self.incarnation, zk_migration_ready=False,
            listeners=[Listener(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)],
            features=[Feature(name=name, min_supported_version=low, max_supported_version=high)
                      for name, (low, high) in sorted(SUPPORTED_FEATURES.items())])

    def needed(self, controller: QuorumController) -> bool:
        """The cluster has registrations and this incarnation is not among them."""
        if controller.features.metadata_version < MV_3_7_IV0:
            return False
        registered = controller.cluster.controllers.get(self.node_id)
        return registered is None or registered.incarnation_id != self.incarnation

    def register_active(self, controller: QuorumController) -> Applied | None:
        """The active controller's own registration, to append; None if it has one."""
        return controller.register_controller(self.request(), 0) if self.needed(controller) else None

    def leader_changed(self, leader_id: int, address: tuple[str, int] | None,
                       controller: Callable[[], QuorumController]) -> None:
        """Register with the new leader, if another node leads and the metadata needs it."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if leader_id < 0 or leader_id == self.node_id or address is None:
            return
        self._task = asyncio.get_running_loop().create_task(self._register_with(leader_id, address, controller))

    async def _register_with(self, leader_id: int, address: tuple[str, int],
                             controller: Callable[[], QuorumController]) -> None:
        # Until the registration is replayed here: an answer can be lost with its connection,
        # and a standby catching up may not yet know the metadata.version that asks for it.
        while True:
            await asyncio.sleep(RETRY_S)
            if not self.needed(controller()):
                if controller().features.metadata_version >= MV_3_7_IV0:
                    return
                continue
            try:
                conn = await KafkaConnection.open(*address, f"kraftwire-controller-{self.node_id}",
                                                  self.timeout_s, self.security)
                try:
                    answer = await conn.request(self.request(), 0, self.timeout_s)
                finally:
                    conn.close()
            except (ConnectionLost, OSError, asyncio.TimeoutError) as exc:
                log.debug("registering with controller %d failed: %s", leader_id, exc)
                continue
            code = getattr(answer, "error_code", Error.NONE)
            if code not in (Error.NONE, Error.NOT_CONTROLLER):
                # Said once: asking again would be refused again, until another node leads.
                log.warning("controller %d refused this controller's registration: %s", leader_id,
                            getattr(answer, "error_message", None) or Error(code).name)
                return

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
