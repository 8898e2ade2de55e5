from collections.abc import Iterable
from typing import Any

from pymemcache.client.base import Client, Key, _KeyCommands

class HashClient(_KeyCommands):
    clients: dict[str, Client]
    hasher: Any
    default_kwargs: dict[str, Any]
    use_pooling: bool
    ignore_exc: bool
    retry_attempts: int
    retry_timeout: float
    dead_timeout: float
    _dead_clients: dict[Any, float]
    _failed_clients: dict[Any, dict[str, Any]]
    def __init__(
        self,
        servers: Iterable[Any],
        hasher: Any = ...,
        serde: Any = None,
        serializer: Any = None,
        deserializer: Any = None,
        connect_timeout: float | None = None,
        timeout: float | None = None,
        no_delay: bool = False,
        socket_module: Any = ...,
        socket_keepalive: Any = None,
        key_prefix: bytes = b"",
        max_pool_size: int | None = None,
        pool_idle_timeout: float = 0,
        lock_generator: Any = None,
        retry_attempts: int = 2,
        retry_timeout: float = 1,
        dead_timeout: float = 60,
        use_pooling: bool = False,
        ignore_exc: bool = False,
        allow_unicode_keys: bool = False,
        default_noreply: bool = True,
        encoding: str = "ascii",
        tls_context: Any = None,
    ) -> None: ...
    def _make_client_key(self, server: Any) -> str: ...
    def add_server(self, server: Any, port: int | None = None) -> None: ...
    def remove_server(self, server: Any, port: int | None = None) -> None: ...
    def _get_client(self, key: Key) -> Client | None: ...
    def close(self) -> None: ...
    def _mark_failed_server(self, server: Any) -> None: ...
    def _safely_run_func(
        self, client: Client, func: Any, default_val: Any, *args: Any, **kwargs: Any
    ) -> Any: ...
    def _set_many(self, client: Client, values: Any, *args: Any, **kwargs: Any) -> Any: ...
    def flush_all(self, delay: int = 0, noreply: bool | None = None) -> None: ...
    def quit(self) -> None: ...
