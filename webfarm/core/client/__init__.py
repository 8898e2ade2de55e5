"""The memcached client: the only code that knows memcached's wire.

- protocol: pymemcache's Client with the pipelined and meta commands the
  farm sends (ReconnectingClient, MetaReply; meta_get, meta_set,
  meta_arithmetic, meta_delete; and, for the queue's hot paths, lines
  whose flags are spelled once: get_line, set_line, delete_quietly_line,
  incr_quietly_line). No module outside this package writes memcached's
  wire: no verb, status or flag byte of its own;
- hashing: which server a key lives on (FarmHash; read_by_nginx);
- ring: one client over every server whose key-to-server map never changes
  (StableHashClient, build_client, parse_servers);
- clients: the process's ring from the settings and a plain client per
  thread to one server (get_client, server_client, server_of), and a
  request's reads through them (get_values);
- batches: meta commands on keys anywhere, one pipeline per server (MetaBatch);
- changing: the old and the new ring as one while the pool changes, a
  moving key's old server its arbiter (ChangingRing, Phase, migrate,
  clear_tombstones).
"""

from webfarm.core.client.batches import MetaBatch
from webfarm.core.client.changing import ChangingRing, Phase, clear_tombstones, migrate
from webfarm.core.client.clients import (
    client_epoch,
    client_options,
    get_client,
    get_values,
    leftover_ring,
    reset_client,
    server_client,
    server_of,
)
from webfarm.core.client.hashing import FarmHash, kept_together, nginx_server_index, read_by_nginx
from webfarm.core.client.protocol import (
    MetaReply,
    ReconnectingClient,
    arithmetic_flags,
    delete_quietly_line,
    flags_bytes,
    get_flags,
    get_line,
    incr_quietly_line,
    item_memory,
    meta_arithmetic,
    meta_command,
    meta_delete,
    meta_get,
    meta_set,
    server_address,
    set_flags,
    set_line,
    with_cas,
    with_opaque,
)
from webfarm.core.client.ring import StableHashClient, build_client, parse_servers

__all__ = [
    "ChangingRing",
    "FarmHash",
    "MetaBatch",
    "MetaReply",
    "Phase",
    "ReconnectingClient",
    "StableHashClient",
    "arithmetic_flags",
    "build_client",
    "clear_tombstones",
    "client_epoch",
    "client_options",
    "delete_quietly_line",
    "flags_bytes",
    "get_client",
    "get_flags",
    "get_line",
    "get_values",
    "incr_quietly_line",
    "item_memory",
    "kept_together",
    "leftover_ring",
    "meta_arithmetic",
    "meta_command",
    "meta_delete",
    "meta_get",
    "meta_set",
    "migrate",
    "nginx_server_index",
    "parse_servers",
    "read_by_nginx",
    "reset_client",
    "server_address",
    "server_client",
    "server_of",
    "set_flags",
    "set_line",
    "with_cas",
    "with_opaque",
]
