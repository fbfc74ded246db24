# Local development and CI entry points. Everything runs natively (no Docker): see infra/README.md.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

PY := .venv/bin/python
STACK := infra/scripts/stack.sh
SERVICES := infra/scripts/services.sh
KAFKA_TOOL := infra/scripts/kafka-tool.sh
# The services' /metrics for the stack's Prometheus (file-based discovery: infra/scripts/stack/prometheus.sh)
PROMETHEUS_TARGETS := .local/prometheus/services.json
TOPIC ?=
ARGS ?=
FROM ?=
MAX ?=
SEED ?=
CLIENT ?=
EXAMPLES ?=
# Processes per service of `make up` / `make secrets` (infra/scripts/services.sh: <service>@2 on port +100)
INSTANCES ?= 1
# Bytecode is cached under .local, never beside the sources: a shell that sets PYTHONDONTWRITEBYTECODE
# made every process compile every module it imports, half of a service's start (docs/decisions.md,
# "Suite time").
export PYTHONPYCACHEPREFIX := $(CURDIR)/.local/pycache
unexport PYTHONDONTWRITEBYTECODE
# pytest-xdist workers of `make test`: most test time is waiting on servers, so more workers than cores
# pay (docs/decisions.md, "Suite time").
WORKERS ?= 4

.PHONY: help setup up down status logs topics secrets kafka-topics kafka-console-consumer \
	kafka-console-producer kafka-consumer-groups consume doctor sense-orphan dev-token lint bench-platform bench-services bench-cluster typecheck test test-fast fuzz bench clean distclean

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-24s %s\n", $$1, $$2}'

setup: ## Install everything the stack needs (Debian packages, .venv, Kafka jars, MediaMTX and Hydra builds); idempotent
	infra/scripts/install-system.sh
	infra/scripts/bootstrap-python.sh
	infra/scripts/install-kafka.sh
	infra/scripts/install-mediamtx.sh
	infra/scripts/install-hydra.sh
	infra/scripts/install-console-assets.sh

up: setup ## Whole local stack: PostgreSQL, Kafka, MediaMTX, Jaeger, Prometheus, topics, dev secrets, the five services, the console [KAFKA_BROKERS=3: a three-broker cluster] [INSTANCES=2: two processes per service]
	$(STACK) up
	$(MAKE) topics secrets
	$(SERVICES) up
	$(SERVICES) targets $(PROMETHEUS_TARGETS)
	@echo "jaeger: http://127.0.0.1:16686 (query API /api/...; OTLP in on 127.0.0.1:14317 gRPC, 127.0.0.1:14318 HTTP)"
	@echo "prometheus: http://127.0.0.1:19090 (HTTP API /api/v1/...: targets, rules, alerts)"
	@echo "console: http://127.0.0.1:$$(sed -n 's/^CONSOLE_HTTP_PORT=//p' .local/env/console.env) (sign in through the local OpenID provider: the dev login picks a user and permissions)"

down: ## Stop the services and the infrastructure
	$(SERVICES) down
	$(STACK) down

status: ## Health of every component and service (exit 1 when any is down)
	@rc=0; $(STACK) status || rc=1; $(SERVICES) status || rc=1; exit $$rc

logs: ## Last lines of every log in .local/logs (LOG_LINES=30)
	@$(STACK) logs
	@$(SERVICES) logs

topics: ## Create the missing Kafka topics of infra/topics.toml
	$(PY) infra/scripts/create_topics.py

secrets: ## Generate dev secrets and per-service env files (when the platform provides the tool)
	@if $(PY) -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("yovision_platform.tools.devsecrets") else 1)' 2>/dev/null; then \
		$(PY) -m yovision_platform.tools.devsecrets --instances $(INSTANCES); \
	else echo "secrets: yovision_platform.tools.devsecrets not present yet: skipped"; fi

kafka-topics: ## Kafka's topic tool, e.g. make kafka-topics ARGS="--describe --topic sense.device.v1"
	$(KAFKA_TOOL) topics $(if $(ARGS),$(ARGS),--list)

kafka-console-consumer: ## Raw console consumer: TOPIC=... [FROM=beginning] [MAX=n] [ARGS=...]
	$(if $(TOPIC),,$(error TOPIC=<topic> is required))
	$(KAFKA_TOOL) console-consumer --topic $(TOPIC) $(if $(filter beginning,$(FROM)),--from-beginning) \
		$(if $(MAX),--max-messages $(MAX)) $(ARGS)

kafka-console-producer: ## Console producer (one message per line on stdin): TOPIC=... [ARGS=...]
	$(if $(TOPIC),,$(error TOPIC=<topic> is required))
	$(KAFKA_TOOL) console-producer --topic $(TOPIC) $(ARGS)

kafka-consumer-groups: ## Kafka's consumer group tool, e.g. make kafka-consumer-groups ARGS="--describe --all-groups"
	$(KAFKA_TOOL) consumer-groups $(if $(ARGS),$(ARGS),--list)

consume: ## Print a topic's Avro events as JSON: TOPIC=... [FROM=beginning] [MAX=n] [ARGS=...]
	$(if $(TOPIC),,$(error TOPIC=<topic> is required))
	$(PY) -m yovision_platform.tools.consume --topic $(TOPIC) $(if $(filter beginning,$(FROM)),--from-beginning) \
		$(if $(MAX),--max $(MAX)) $(ARGS)

doctor: ## Check the invariants of the running stack: no dead letter, outboxes drained, no lag, no leaked secret [WAIT=s] [ENV_DIR=.local]
	$(PY) -m yovision_platform.tools.doctor --env-dir $(if $(ENV_DIR),$(ENV_DIR),.local) --wait $(if $(WAIT),$(WAIT),30)

sense-orphan: ## Orphan operator CLI with the local orphan-scanner env: ARGS="report" | ARGS="apply --scan-id ID --actor NAME --confirm '<text>'"
	@bash infra/scripts/services.sh exec orphan-scanner $(CURDIR)/.venv/bin/sense-orphan $(ARGS)

dev-token: ## An access token from the local OpenID provider: SERVICE=signal-watcher SUB=alice [PERMS="signal:read"] (or CLIENT=operator-cli)
	$(if $(SERVICE),,$(error SERVICE=<service> is required))
	$(if $(SUB)$(CLIENT),,$(error SUB=<user id> or CLIENT=<machine client> is required))
	@$(PY) -m yovision_platform.tools.devtoken --service $(SERVICE) $(if $(SUB),--sub $(SUB),--client $(CLIENT)) \
		$(foreach p,$(PERMS),--perm $(p))

lint: ## ruff check + ruff format --check
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: ## mypy (libs/platform strict via pyproject, plus the services and the benchmarks)
	.venv/bin/mypy libs/platform/src services/*/src bench services/*/bench

test: setup lint typecheck ## Lint, types and every test tier on real infrastructure, WORKERS in parallel; ends with the suite report
	infra/scripts/install-promtool.sh
	infra/scripts/install-helm.sh
	infra/scripts/install-k8s-validate.sh
	$(STACK) up pg kafka mediamtx
	$(MAKE) topics secrets
	@rc=0; YOVISION_STACK_STARTED=1 .venv/bin/pytest -n $(WORKERS) --dist loadgroup || rc=$$?; \
	if [[ $$rc == 5 ]]; then echo "make test: pytest collected no tests: failing" >&2; fi; exit $$rc

test-fast: ## The inner loop (about a minute, no server): lint, types, unit tests and port contracts on fakes
	@[[ -x .venv/bin/pytest ]] || infra/scripts/bootstrap-python.sh
	$(MAKE) lint typecheck
	.venv/bin/pytest -n 2 -m fast -q tests/unit tests/ports

fuzz: setup ## API fuzzing on a fresh random seed: schemathesis on every service, property tests against MediaMTX [SEED=n replays] [EXAMPLES=100]
	SEED='$(SEED)' EXAMPLES='$(EXAMPLES)' infra/scripts/fuzz.sh

bench: bench-platform bench-services bench-cluster ## All benchmarks (platform, the services', then cluster mode); goal lines printed; exits non-zero on a wrong count

bench-platform: ## Platform benchmarks: relay (1/2/4, aiokafka vs confluent) vs raw produce vs ProducerPerformance, paced latency, outbox size, enqueue, leases, access tokens, one event's path, tracing's cost (bench/)
	$(PY) -m bench $(ARGS)
	$(PY) -m bench.access_tokens
	$(PY) -m bench.single_event
	$(PY) -m bench.tracing

bench-services: ## Service benchmarks: Sense convergence, Sense→Bell relay, Signal probes, media uploads/transcodes, console pages and sign-in
	$(STACK) up pg kafka mediamtx
	$(PY) services/sense-reconciler/bench/converge_bench.py
	$(PY) services/bell-receiver/bench/audit_push_bench.py
	$(PY) services/signal-watcher/bench/probe_bench.py
	$(PY) services/orphan-scanner/bench/scan_bench.py
	$(PY) services/media-worker/bench/media_bench.py
	$(PY) services/console/bench/render_bench.py
	$(PY) services/console/bench/sign_in_bench.py

bench-cluster: ## Cluster mode (bench/cluster.py, ~4 min): relay vs ProducerPerformance, leader-kill window, lag through a rolling restart, on a private 3-broker cluster [CLUSTER_ARGS=--quick]
	$(PY) -m bench --cluster $(CLUSTER_ARGS)

clean: down ## Stop everything and delete local state (data, logs, secrets); keeps built/downloaded caches
	rm -rf .local/pg .local/kafka/data .local/kafka/cluster.id .local/kafka/server.properties .local/kafka/cluster \
		.local/mediamtx .local/prometheus \
		.local/logs .local/run .local/secrets .local/env .local/stack.env

distclean: down ## Like clean, and also delete the caches (Kafka jars, MediaMTX, Jaeger and Prometheus builds, uv) and .venv
	rm -rf .local .venv
