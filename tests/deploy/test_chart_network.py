"""NetworkPolicies allow exactly the flows of docs/architecture.md, and the Ingress exposes only the
user-facing paths of the OpenAPI documents (never /internal/: only Sense reaches Bell's relay endpoint)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.deploy.chart import DATABASE_SETTINGS, REPO_ROOT, SETTINGS, Manifest, Obj, canonical
from tests.deploy.renders import RENDERS, rendered
from tests.deploy.values import enabled_services, values_of

HTTP = [{"port": "http", "protocol": "TCP"}]
MEDIAMTX_CLIENTS = {"sense-reconciler", "orphan-scanner"}
USER_FACING = {"orphan-scanner", "bell-receiver", "signal-watcher", "media-worker", "console"}


def selector_of(manifest: Manifest, service: str) -> Obj:
    labels: Obj = manifest.deployments()[service]["spec"]["selector"]["matchLabels"]
    return labels


def egress(rule: dict[str, Any]) -> Obj:
    return {"to": rule["to"], "ports": rule["ports"]} if rule["to"] else {"ports": rule["ports"]}


def pods(manifest: Manifest, service: str) -> list[Obj]:
    return [{"podSelector": {"matchLabels": selector_of(manifest, service)}}]


def port_of(service: str) -> list[Obj]:
    return [{"port": SETTINGS[service].model_fields["http_port"].default, "protocol": "TCP"}]


def expected_flows(name: str, manifest: Manifest, service: str) -> tuple[list[Obj], list[Obj]]:
    values = values_of(name)
    np = values["networkPolicy"]
    relay = values["services"]["sense-reconciler"]["bellRelay"]["enabled"]
    console = values["services"]["console"]["enabled"]
    ingress = [{"from": np["monitoring"]["from"], "ports": HTTP}]
    if service == "bell-receiver" and relay:
        ingress.append({"from": pods(manifest, "sense-reconciler"), "ports": HTTP})
    if console and service != "console":
        ingress.append({"from": pods(manifest, "console"), "ports": HTTP})
    if service in USER_FACING:
        ingress.append({"from": np["userTraffic"]["from"], "ports": HTTP})
    if service == "sense-reconciler" and np["operatorTraffic"]["from"]:
        ingress.append({"from": np["operatorTraffic"]["from"], "ports": HTTP})
    out = [egress(np["dns"]), egress(np["identityProvider"])]  # the issuer: JWKS, sign-in, drain token
    if values["tracing"]["otlpEndpoint"]:
        out.append(egress(np["tracing"]))  # spans to the OpenTelemetry collector
    if service in DATABASE_SETTINGS:
        out += [egress(np["kafka"]), egress(np["postgres"])]
    if service in MEDIAMTX_CLIENTS:
        out.append(egress(np["mediamtx"]))
    if service == "sense-reconciler" and relay:
        out.append({"to": pods(manifest, "bell-receiver"), "ports": port_of("bell-receiver")})
    if service == "console":
        out += [{"to": pods(manifest, target), "ports": port_of(target)} for target in DATABASE_SETTINGS]
    if service == "signal-watcher":
        out.append({"to": np["probeTargets"]["to"]})
    return ingress, out


@pytest.mark.parametrize("name", RENDERS)
def test_each_service_may_talk_only_along_the_architectures_flows(name: str) -> None:
    manifest = rendered(name)
    policies = manifest.network_policies()
    assert set(policies) == enabled_services(name)
    for service, policy in policies.items():
        spec = policy["spec"]
        assert spec["podSelector"]["matchLabels"] == selector_of(manifest, service)
        assert spec["policyTypes"] == ["Ingress", "Egress"]  # both default-deny
        ingress, out = expected_flows(name, manifest, service)
        assert sorted(map(canonical, spec["ingress"])) == sorted(map(canonical, ingress)), service
        assert sorted(map(canonical, spec["egress"])) == sorted(map(canonical, out)), service


@pytest.mark.parametrize("name", RENDERS)
def test_no_ingress_rule_is_open_to_anyone(name: str) -> None:
    for policy in rendered(name).of_kind("NetworkPolicy"):
        for rule in policy["spec"].get("ingress", []):
            assert rule.get("from"), policy["metadata"]["name"]


def test_production_names_every_peer_and_probes_reach_only_public_addresses() -> None:
    manifest = rendered("production+options")
    for policy in manifest.of_kind("NetworkPolicy"):
        for rule in policy["spec"]["egress"]:
            assert rule.get("to"), policy["metadata"]["name"]
    probes = manifest.network_policies()["signal-watcher"]["spec"]["egress"][-1]["to"]
    private = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "169.254.0.0/16"}
    (ipv4,) = [p["ipBlock"] for p in probes if p["ipBlock"]["cidr"] == "0.0.0.0/0"]
    assert private <= set(ipv4["except"])


def test_only_sense_and_the_console_reach_bell_inside_the_namespace() -> None:
    manifest = rendered("production")
    bell = manifest.network_policies()["bell-receiver"]["spec"]
    in_namespace = [p for r in bell["ingress"] for p in r["from"] if set(p) == {"podSelector"}]
    assert sorted(map(canonical, in_namespace)) == sorted(
        map(canonical, pods(manifest, "sense-reconciler") + pods(manifest, "console"))
    )
    without_relay = rendered("default").network_policies()["bell-receiver"]["spec"]
    assert not [p for r in without_relay["ingress"] for p in r["from"] if set(p) == {"podSelector"}]


def openapi_paths(service: str) -> set[str]:
    document = json.loads((REPO_ROOT / "schemas" / "openapi" / f"{service}.v1.json").read_text())
    return set(document["paths"])


def prefix_matches(prefix: str, path: str) -> bool:
    """Kubernetes' `pathType: Prefix`: element by element, split by `/` (`/v1/a` routes `/v1/a` and
    `/v1/a/b`, not `/v1/ab` nor `/v1/a:test`)."""
    wanted = [e for e in prefix.split("/") if e]
    return [e for e in path.split("/") if e][: len(wanted)] == wanted


def test_prefix_matching_is_per_path_element() -> None:
    assert prefix_matches("/v1/signal-watchers", "/v1/signal-watchers/{watcher_id}/test")
    assert prefix_matches("/v1/signal-watchers", "/v1/signal-watchers")
    assert not prefix_matches("/v1/signal-watchers", "/v1/signal-watchers:test")
    assert prefix_matches("/v1/signal-watchers:test", "/v1/signal-watchers:test")


def test_the_ingress_routes_exactly_the_user_facing_paths() -> None:
    manifest = rendered("production")
    (ingress,) = manifest.of_kind("Ingress")
    hosts = values_of("production")["ingress"]
    names = {d["metadata"]["name"]: s for s, d in manifest.deployments().items()}
    rules = {rule["host"]: rule["http"]["paths"] for rule in ingress["spec"]["rules"]}
    assert set(rules) == {hosts["host"], hosts["consoleHost"]}
    (console,) = rules[hosts["consoleHost"]]  # the console's pages, on a host of their own
    assert (console["path"], names[console["backend"]["service"]["name"]]) == ("/", "console")
    routed: dict[str, set[str]] = {}
    for path in rules[hosts["host"]]:
        assert path["pathType"] == "Prefix"
        routed.setdefault(names[path["backend"]["service"]["name"]], set()).add(path["path"])
    assert set(routed) == USER_FACING - {"console"}
    for service, prefixes in routed.items():
        public = {p for p in openapi_paths(service) if not p.startswith("/internal/")}
        assert all(not prefix.startswith("/internal") for prefix in prefixes)
        covered = {p for p in openapi_paths(service) if any(prefix_matches(prefix, p) for prefix in prefixes)}
        assert covered == public  # every public path, and nothing internal
