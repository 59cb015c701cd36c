"""The API registry, built from the generated request/response classes.

Header versions follow Kafka's rule: flexible API versions use request header v2 and response
header v1; ApiVersions responses always use response header v0 so that a client can read the
error even when it asked for a version the server does not know.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.generated.messages import BY_API_KEY, ApiKey
from protocol.message import Message


@dataclass(frozen=True)
class Api:
    key: ApiKey
    name: str
    request: type[Message]
    response: type[Message]

    @property
    def min_version(self) -> int:
        return self.request.VALID_VERSIONS[0]

    @property
    def max_version(self) -> int:
        return self.request.VALID_VERSIONS[1]

    def request_header_version(self, version: int) -> int:
        return 2 if self.request.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.response.is_flexible(version) else 0


def _build() -> dict[int, Api]:
    apis = {}
    for (kind, key), cls in BY_API_KEY.items():
        if kind != "request":
            continue
        response = BY_API_KEY[("response", key)]
        apis[key] = Api(ApiKey(key), cls.NAME.removesuffix("Request"), cls, response)
    return dict(sorted(apis.items()))


APIS: dict[int, Api] = _build()
BY_NAME: dict[str, Api] = {api.name: api for api in APIS.values()}
