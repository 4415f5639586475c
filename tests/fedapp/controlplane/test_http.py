"""The control plane's HTTP surface over parts that are built but not running (no bus):
status, metrics, readiness, the broadcast-delay fault hook, the snapshot and admin reconcile."""

from __future__ import annotations

import io
from collections.abc import Callable

import httpx

from gameday.fedapp.common import JsonLog
from gameday.fedapp.controlplane import ControlPlane
from gameday.fedapp.skeleton import start_http
from gameday.fedapp.spec import FederationSpec
from gameday.fedapp.wire import alive_key, instance_key
from tests.fedapp.helpers import run

A1 = instance_key("a", "a-1")


def test_status_metrics_and_fault_hook_read_and_steer_the_parts(
    make_spec: Callable[..., FederationSpec], admin_headers: dict[str, str]
) -> None:
    spec = make_spec(control_plane={"state": "ephemeral"})  # no bus: the store keeps it in memory
    cp = ControlPlane(spec, JsonLog("cp-test", stream=io.StringIO()))
    ep = cp.scope.endpoint
    url = f"http://{ep.host}:{ep.port}"

    async def body() -> None:
        servers = await start_http(cp, ep.host, ep.port, cp.log)
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                r = await http.get(f"{url}/readyz")
                assert (r.status_code, r.json()["reason"]) == (503, "starting")
                assert (await http.post(f"{url}/admin/reconcile", headers=admin_headers)).status_code == 503

                await cp.store.mutate(lambda s: s.set_entry(A1, {"healthy": True, "weight": 1}))
                await cp.store.mutate(lambda s: s.set_entry(alive_key("a"), {"alive": True}))
                cp.consumer.events_consumed, cp.consumer.backlog = 7, 3
                st = (await http.get(f"{url}/status")).json()
                assert (st["version"], st["announced_version"], st["entries"]) == (2, 2, 2)
                assert (st["events_consumed"], st["consumer_backlog"], st["ready"]) == (7, 3, False)
                assert st["state_mode"] == "ephemeral" and st["scope"] == "global"
                assert st["regions_alive"] == {r.name: r.name == "a" for r in spec.regions}
                assert st["nats_connected"] is False and st["reconcile"]["passes"] == 0

                bad = await http.post(f"{url}/admin/fault", json={"broadcast_delay": -1}, headers=admin_headers)
                assert bad.status_code == 400 and "0..3600" in bad.text
                nan = await http.post(f"{url}/admin/fault", json={"broadcast_delay": "x"}, headers=admin_headers)
                assert nan.status_code == 400 and "broadcast_delay" in nan.text
                ok = await http.post(f"{url}/admin/fault", json={"broadcast_delay": 1.5}, headers=admin_headers)
                assert ok.json()["broadcast_delay"] == 1.5 and cp.broadcaster.delay == 1.5
                metrics = (await http.get(f"{url}/metrics")).text
                assert "gameday_cp_broadcast_delay_seconds 1.5" in metrics
                assert "gameday_cp_version 2" in metrics and "gameday_cp_events_consumed_total 7" in metrics
                assert 'gameday_cp_region_alive{region="a"} 1' in metrics

                snap = (await http.get(f"{url}/snapshot")).json()
                assert snap["version"] == 2 and snap["entries"][A1] == {"healthy": True, "weight": 1}

                cp.rt.ready = True
                r = await http.get(f"{url}/readyz")
                assert (r.status_code, r.json()) == (200, {"ready": True, "version": 2})
                rec = await http.post(f"{url}/admin/reconcile", headers=admin_headers)
                assert rec.status_code == 200 and rec.json()["replied"] == []  # no bus: nobody asked
        finally:
            await servers.cleanup()

    run(body)
