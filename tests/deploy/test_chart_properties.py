"""Properties of the rendered chart that the issue asks for, on every render (tests/deploy/renders.py):
secrets only as files, non-root read-only containers, probes, resources, PDBs, the migration hook with the
admin DSN that serving pods never get, media-worker's drain, Sense's spread, and monitoring objects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.chart import (
    CHART,
    DATABASE_SETTINGS,
    REPO_ROOT,
    SETTINGS,
    Manifest,
    Obj,
    containers,
    env_of,
    pod_spec,
)
from tests.deploy.renders import RENDERS, rendered
from tests.deploy.values import enabled_services, values_of

SECRET_DIR = "/run/secrets/yovision/"
ADMIN_DIR = "/run/secrets/yovision-admin/"
TLS_DIR = "/run/secrets/yovision-tls/"
KAFKA_TLS_DIR = "/run/secrets/yovision-kafka-tls/"
SECRET_WORDS = re.compile(r"DSN|KEY|TOKEN|PASSWORD|SECRET", re.I)
FILE_SETTING = re.compile(r"_FILES?$")
MOUNTED_DIRS = (SECRET_DIR, ADMIN_DIR, TLS_DIR, KAFKA_TLS_DIR, "/etc/yovision/")
LOOKS_SECRET = re.compile(r"://[^/\s]*@|[0-9a-f]{32}|-----BEGIN", re.I)  # URL credentials, hex keys, PEM
SHUTDOWN_GRACE_SECONDS = 20  # yovision_platform.web: workers' time after the HTTP server stopped

pytestmark = pytest.mark.parametrize("name", RENDERS)


def workloads(manifest: Manifest) -> list[Obj]:
    return manifest.of_kind("Deployment") + manifest.of_kind("Job")


def test_every_service_has_a_deployment_a_service_and_a_migration_job(name: str) -> None:
    manifest = rendered(name)
    assert set(manifest.deployments()) == enabled_services(name)
    assert set(manifest.migration_jobs()) == enabled_services(name) & set(
        DATABASE_SETTINGS
    )  # not the console
    services = {
        s["metadata"]["labels"]["app.kubernetes.io/component"]: s for s in manifest.of_kind("Service")
    }
    for service, deployment in manifest.deployments().items():
        assert services[service]["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        port = SETTINGS[service].model_fields["http_port"].default
        assert services[service]["spec"]["ports"] == [
            {"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}
        ]


def test_replicas_follow_the_values_and_more_than_one_is_the_default(name: str) -> None:
    values = values_of(name)["services"]
    for service, deployment in rendered(name).deployments().items():
        assert deployment["spec"]["replicas"] == values[service]["replicas"] >= 2


def test_no_secret_is_an_env_value_or_a_chart_object(name: str) -> None:
    manifest = rendered(name)
    assert manifest.of_kind("Secret") == []  # secrets come from Secrets made outside the chart
    for workload in workloads(manifest):
        for container in containers(workload):
            assert "envFrom" not in container
            for entry in container["env"]:
                setting, value = entry["name"], entry.get("value", "")
                assert set(entry) <= {"name", "value", "valueFrom"}
                assert "secretKeyRef" not in entry.get("valueFrom", {})
                assert not LOOKS_SECRET.search(value), entry
                if SECRET_WORDS.search(setting) and not setting.endswith("_KEY_ID"):
                    assert FILE_SETTING.search(setting), entry  # a secret is always named by its file
                if setting.endswith("_FILE") and setting != "MEDIA_CAPABILITY_FILE":
                    assert value.startswith(MOUNTED_DIRS), entry
                if setting.endswith("_FILES"):
                    assert all(path.startswith(SECRET_DIR) for path in yaml.safe_load(value).values())


def test_every_secret_file_setting_names_a_projected_key_of_a_mounted_secret(name: str) -> None:
    for workload in workloads(rendered(name)):
        spec = pod_spec(workload)
        volumes = {v["name"]: v for v in spec["volumes"]}
        for container in containers(workload):
            mounts = {m["mountPath"].rstrip("/") + "/": volumes[m["name"]] for m in container["volumeMounts"]}
            for entry in container["env"]:
                value = entry.get("value", "")
                if not value.startswith((SECRET_DIR, ADMIN_DIR, TLS_DIR, KAFKA_TLS_DIR)):
                    continue
                directory, _, key = value.rpartition("/")
                secret = mounts[directory + "/"]["secret"]
                assert key in {item["path"] for item in secret["items"]}
                assert secret["defaultMode"] & 0o007 == 0  # the services refuse files "other" may read
            assert spec["securityContext"]["fsGroup"] == 10001  # group-readable by the service's user


def secret_items(workload: Obj) -> set[str]:
    volumes = pod_spec(workload)["volumes"]
    return {item["key"] for v in volumes if "secret" in v for item in v["secret"]["items"]}


def test_the_audit_push_key_files_of_bell_are_files_of_its_secret(name: str) -> None:
    bell = rendered(name).deployments()["bell-receiver"]
    (container,) = containers(bell)
    key_files = yaml.safe_load(env_of(container)["BELL_AUDIT_PUSH_KEY_FILES"]["value"])
    assert set(key_files) == set(values_of(name)["services"]["bell-receiver"]["relayKeyIds"])
    assert {Path(p).name for p in key_files.values()} <= secret_items(bell)


def test_the_key_rings_are_files_of_the_secret_and_the_active_key_one_of_them(name: str) -> None:
    for service, prefix in (("sense-reconciler", "SENSE"), ("signal-watcher", "SIGNAL")):
        values = values_of(name)["services"][service]
        workload = rendered(name).deployments()[service]
        (container,) = containers(workload)
        env = env_of(container)
        key_files = {}
        if values["secretsKeyIds"]:
            key_files = yaml.safe_load(env[f"{prefix}_SECRETS_KEY_FILES"]["value"])
        assert set(key_files) == set(values["secretsKeyIds"])
        assert {Path(p).name for p in key_files.values()} <= secret_items(workload)
        active = values["secretsActiveKeyId"]
        assert env.get(f"{prefix}_SECRETS_ACTIVE_KEY_ID", {}).get("value", "") == active
        assert not active or active in key_files
    signal = values_of(name)["services"]["signal-watcher"]
    env = env_of(next(containers(rendered(name).deployments()["signal-watcher"])))
    assert ("SIGNAL_SECRETS_AES_KEY_FILE" in env) == signal["legacyAesKey"]


def test_every_media_server_of_the_values_is_registered_with_its_credentials_file(name: str) -> None:
    mediamtx = values_of(name)["mediamtx"]
    for service, prefix in (("sense-reconciler", "SENSE"), ("orphan-scanner", "ORPHAN")):
        workload = rendered(name).deployments()[service]
        env = env_of(next(containers(workload)))
        if not mediamtx.get("servers"):
            assert env[f"{prefix}_MEDIAMTX_API_URL"]["value"] == mediamtx["apiUrl"]
            assert (f"{prefix}_MEDIAMTX_CREDENTIALS_FILE" in env) == mediamtx["credentials"]
            continue
        servers = yaml.safe_load(env[f"{prefix}_MEDIA_SERVERS"]["value"])
        assert f"{prefix}_MEDIAMTX_API_URL" not in env
        assert {i: s["api_url"] for i, s in servers.items()} == {
            i: s["apiUrl"] for i, s in mediamtx["servers"].items()
        }
        for server_id, server in servers.items():
            assert ("credentials_file" in server) == bool(mediamtx["servers"][server_id].get("credentials"))
            if "credentials_file" in server:
                assert server["credentials_file"].startswith(SECRET_DIR)
                assert Path(server["credentials_file"]).name in secret_items(workload)


def test_every_container_runs_as_non_root_with_a_read_only_root_filesystem(name: str) -> None:
    for workload in workloads(rendered(name)):
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] != 0
        assert spec["automountServiceAccountToken"] is False
        for container in containers(workload):
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True
            assert context["runAsUser"] == 10001  # the images' USER
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["privileged"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}  # writable scratch
        # the "restricted" Pod Security Standard: seccomp, and only these volume types
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for volume in spec["volumes"]:
            assert set(volume) - {"name"} <= {"secret", "configMap", "emptyDir", "persistentVolumeClaim"}


def test_every_deployment_probes_readyz_and_healthz_on_its_port(name: str) -> None:
    for service, deployment in rendered(name).deployments().items():
        (container,) = containers(deployment)
        cls = SETTINGS[service]
        port = cls.model_fields["http_port"].default
        assert container["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        env = env_of(container)
        assert env[cls.env_var_name("http_port")]["value"] == str(port)
        scheme = "HTTPS" if cls.env_var_name("http_tls_cert_file") in env else "HTTP"
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": scheme}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": scheme}
        assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": scheme}


def test_tls_files_come_from_the_services_tls_secret(name: str) -> None:
    for service, deployment in rendered(name).deployments().items():
        secret_name = values_of(name)["services"][service]["tls"]["secretName"]
        (container,) = containers(deployment)
        env = env_of(container)
        cls = SETTINGS[service]
        volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
        if not secret_name:
            assert cls.env_var_name("http_tls_cert_file") not in env and "tls" not in volumes
            continue
        assert volumes["tls"]["secret"]["secretName"] == secret_name
        assert env[cls.env_var_name("http_tls_cert_file")]["value"] == TLS_DIR + "tls.crt"
        assert env[cls.env_var_name("http_tls_key_file")]["value"] == TLS_DIR + "tls.key"


def test_sense_pushes_to_bell_over_https_trusting_the_configured_ca(name: str) -> None:
    values = values_of(name)["services"]
    (sense,) = containers(rendered(name).deployments()["sense-reconciler"])
    env = env_of(sense)
    if not values["sense-reconciler"]["bellRelay"]["enabled"]:
        assert not any(n.startswith("SENSE_BELL_") for n in env) and "SSL_CERT_FILE" not in env
        return
    bell_service = rendered(name).deployments()["bell-receiver"]["metadata"]["name"]
    expected = values["sense-reconciler"]["bellRelay"]["url"] or f"https://{bell_service}.yovision.svc:18083"
    assert env["SENSE_BELL_URL"]["value"] == expected
    assert env["SENSE_BELL_KEY_FILE"]["value"] == SECRET_DIR + "bell-relay-key"
    mounts = {m["mountPath"]: m["name"] for m in sense["volumeMounts"]}
    ca = values["sense-reconciler"]["bellRelay"]["caBundle"]
    assert env["SSL_CERT_FILE"]["value"] == f"/etc/yovision/bell-ca/{ca['key']}"
    assert mounts["/etc/yovision/bell-ca"] == "bell-ca"


def test_every_container_has_resource_requests_and_limits(name: str) -> None:
    for workload in workloads(rendered(name)):
        for container in containers(workload):
            assert {"cpu", "memory"} <= set(container["resources"]["requests"])
            assert "memory" in container["resources"]["limits"]


def test_every_deployment_has_a_disruption_budget_that_never_allows_all_pods(name: str) -> None:
    manifest = rendered(name)
    budgets = {p["metadata"]["name"]: p for p in manifest.of_kind("PodDisruptionBudget")}
    for deployment in manifest.of_kind("Deployment"):
        budget = budgets[deployment["metadata"]["name"]]["spec"]
        assert budget["selector"] == deployment["spec"]["selector"]
        assert 1 <= budget["maxUnavailable"] < deployment["spec"]["replicas"]


def test_migrations_run_as_a_hook_with_the_admin_dsn_that_serving_pods_never_get(name: str) -> None:
    manifest = rendered(name)
    admin_secret = values_of(name)["migrations"]["adminSecret"]["name"]
    for service, job in manifest.migration_jobs().items():
        annotations = job["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
        (container,) = containers(job)
        assert container["args"] == ["migrate"]
        migration_setting = SETTINGS[service].env_var_name("migration_dsn_file")
        assert env_of(container)[migration_setting]["value"].startswith(ADMIN_DIR)
        assert admin_secret in {v.get("secret", {}).get("secretName") for v in pod_spec(job)["volumes"]}
        # the Job's environment is the serving one plus the admin DSN: `migrate` loads the same settings;
        # except tracing: `migrate` makes no span (and its NetworkPolicy has no way to a collector)
        (serving,) = containers(manifest.deployments()[service])
        tracing = {
            SETTINGS[service].env_var_name(f) for f in ("tracing_otlp_endpoint", "tracing_sampling_ratio")
        }
        assert set(env_of(container)) == (set(env_of(serving)) - tracing) | {migration_setting}
        assert (
            job["spec"]["template"]["metadata"]["labels"]
            != (manifest.deployments()[service]["spec"]["selector"]["matchLabels"])
        )
    for deployment in manifest.of_kind("Deployment"):
        assert all(
            v.get("secret", {}).get("secretName") != admin_secret for v in pod_spec(deployment)["volumes"]
        )
        for container in containers(deployment):
            assert not any(e.endswith("_MIGRATION_DSN_FILE") for e in env_of(container))
            assert all(
                not m["mountPath"].startswith(ADMIN_DIR.rstrip("/")) for m in container["volumeMounts"]
            )


def test_media_worker_drains_before_it_stops_and_waits_long_enough(name: str) -> None:
    manifest = rendered(name)
    media = manifest.deployments()["media-worker"]
    (container,) = containers(media)
    drain_values = values_of(name)["services"]["media-worker"]["drain"]
    timeout = drain_values["timeoutSeconds"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command == [
        "python",
        "/etc/yovision/drain/media-drain.py",
        "--timeout-seconds",
        str(timeout),
        "--client-id",
        drain_values["clientId"],
        "--client-secret-file",
        SECRET_DIR + "drain-client-secret",  # the drain client's secret: a key of media-worker's Secret
        "--scope",
        drain_values["scope"],
    ]
    assert "drain-client-secret" in secret_items(media)
    assert pod_spec(media)["terminationGracePeriodSeconds"] >= timeout + SHUTDOWN_GRACE_SECONDS + 5
    drain = manifest.named("ConfigMap", f"{media['metadata']['name']}-drain")
    assert drain["data"]["media-drain.py"] == (CHART / "files" / "media-drain.py").read_text().rstrip("\n")
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["drain"] == "/etc/yovision/drain"
    # each pod its own capability file, every pod the same storage
    volumes = {v["name"]: v for v in pod_spec(media)["volumes"]}
    assert "emptyDir" in volumes["media-run"]
    assert env_of(container)["MEDIA_CAPABILITY_FILE"]["value"].startswith(mounts["media-run"] + "/")
    assert env_of(container)["MEDIA_STORAGE_DIR"]["value"] == mounts["media-storage"]
    assert "persistentVolumeClaim" in volumes["media-storage"]
    # a fixed id per pod: a restarted container releases its own predecessor's leases at once
    assert env_of(container)["MEDIA_INSTANCE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_other_services_stop_within_the_shutdown_grace(name: str) -> None:
    for service, deployment in rendered(name).deployments().items():
        if service != "media-worker":
            assert pod_spec(deployment)["terminationGracePeriodSeconds"] >= SHUTDOWN_GRACE_SECONDS + 5
            assert "lifecycle" not in containers(deployment).__next__()


def test_sense_replicas_spread_across_nodes(name: str) -> None:
    sense = rendered(name).deployments()["sense-reconciler"]
    spec = pod_spec(sense)
    selector = sense["spec"]["selector"]
    anti = spec["affinity"]["podAntiAffinity"]
    required = values_of(name)["services"]["sense-reconciler"]["spread"]["nodes"] == "required"
    if required:
        (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    else:
        (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        term = preferred["podAffinityTerm"]
    assert (term["topologyKey"], term["labelSelector"]) == ("kubernetes.io/hostname", selector)
    by_key = {c["topologyKey"]: c for c in spec["topologySpreadConstraints"]}
    assert by_key["kubernetes.io/hostname"]["labelSelector"] == selector
    assert by_key["kubernetes.io/hostname"]["whenUnsatisfiable"] == (
        "DoNotSchedule" if required else "ScheduleAnyway"
    )


def test_monitoring_objects_follow_the_values(name: str) -> None:
    manifest = rendered(name)
    monitoring = values_of(name)["monitoring"]
    monitors = manifest.of_kind("ServiceMonitor")
    if not monitoring["serviceMonitor"]["enabled"]:
        assert monitors == []
    else:
        services = {s["metadata"]["name"]: s for s in manifest.of_kind("Service")}
        assert len(monitors) == len(enabled_services(name))
        for monitor in monitors:
            service = services[monitor["metadata"]["name"]]
            assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
            (endpoint,) = monitor["spec"]["endpoints"]
            assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
            component = service["metadata"]["labels"]["app.kubernetes.io/component"]
            tls = values_of(name)["services"][component]["tls"]["secretName"]
            assert endpoint.get("scheme", "http") == ("https" if tls else "http")
    rules = manifest.of_kind("PrometheusRule")
    if not monitoring["prometheusRule"]["enabled"]:
        assert rules == []
    else:
        (rule,) = rules
        alerts = yaml.safe_load((REPO_ROOT / "infra" / "prometheus" / "alerts.yml").read_text())
        assert rule["spec"]["groups"] == alerts["groups"]
