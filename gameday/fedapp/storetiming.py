"""The reference store's timing constants (DESIGN.md section 9), apart from the store's code so
the harness can state the failover they make (:func:`gameday.targets.fedapp_spec.stated_replication`)
without importing the NATS client."""

from __future__ import annotations

PING_INTERVAL = 1.0
"""Seconds between a store client's pings of its server; two unanswered and it reconnects to the
next node. A node frozen or partitioned (``store_isolated``, ``region_blackhole``) keeps its TCP
connections open, so without pings its clients would wait on it for minutes (nats.py's default:
2 min x 2)."""
MAX_OUTSTANDING_PINGS = 2
RECONNECT_WAIT = 0.2
"""Seconds a store client waits before connecting to a node it tried last (nats.py's ``reconnect_time_wait``)."""
DEAD_CONNECTION = PING_INTERVAL * (MAX_OUTSTANDING_PINGS + 1) + RECONNECT_WAIT
"""Seconds, at most, before a store client connected to a frozen node is connected to another:
its ping timer fires every :data:`PING_INTERVAL`, the third tick without an answer declares the
connection stale (at most 3 s after the freeze), then it reconnects to the next node."""
LEASE = 1.0
"""Seconds an announcement of the primary is good for (``lease_until``, wall clock): an app
instance writes to (and reads from) the announced primary only while it holds an unexpired
lease, and the store controller promotes a standby only once the old primary's last lease has
run out. So an old primary cut off alive (frozen, partitioned) and back later cannot take a
write from an app that never heard of the promotion: its apps' leases expired while it was gone,
and a stale announcement delivered late carries an expired one. Assumes the clocks of the
controller and the apps agree to well within the lease (one host here; NTP elsewhere)."""
ANNOUNCE_EVERY = 0.2
"""Seconds between announcements of the primary (an app that missed one hears the next)."""

RAFT_ELECTION_TIMEOUT = (4.0, 9.0)
"""Seconds: nats-server's Raft election timeout (``minElectionTimeoutDefault`` ..
``maxElectionTimeoutDefault`` in nats-server's server/raft.go; not configurable). A follower that
has heard nothing from its leader for a random time in this range campaigns. The ``sync`` store's
stream (one replica per region, at most 3) is such a Raft group: when its leader's node is lost, the
survivors elect a new one, and writes are refused until then."""
RAFT_HEARTBEAT = 1.0
"""Seconds between a Raft leader's heartbeats (``hbIntervalDefault``): a follower last heard its
leader at most this long before the leader was lost (sooner under writes: every append counts)."""
RAFT_CAMPAIGN_MAX = 0.8
"""Seconds: a candidate that won no vote campaigns again within this (``maxCampaignTimeoutDefault``,
8 x 100 ms): two followers campaigning at once cost one more round."""
