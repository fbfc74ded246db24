#!/usr/bin/env bash
# Writes the files infra/compose.yaml needs, under .local/docker/ (git-ignored, never in a build context):
#   secrets/pg_superuser_password   PostgreSQL superuser password (applied only when the pg-data volume is created)
#   secrets/pg_admin_dsn            postgresql://postgres:<pw>@postgres:5432/yovision     (the migrate jobs only)
#   secrets/<schema>_runtime_dsn    postgresql://<schema>_app:<pw>@postgres:5432/yovision  (one per service)
#   secrets/bell_relay_key          HMAC key bell-receiver accepts from Sense (key id relay-dev-1)
#   secrets/console_session_key     key of the console's encrypted session cookies
#   secrets/identity_provider_dsn   postgresql://hydra:<pw>@postgres:5432/yovision: the identity provider's role
#   secrets/identity_provider_system_secret   ORY Hydra's system secret (encrypts its data at rest)
#   secrets/identity_provider_config          Hydra's second configuration file: the two above (dsn, secrets)
#   secrets/identity_client_<client>          the secret of each OAuth 2.0 client (console, dev_token,
#                                             operator_cli, bench: URL-safe, 43 characters)
#   secrets/signal_secrets_aes_key  AES-256-GCM key of signal-watcher's watcher headers and bodies at rest
#   secrets/sense_secrets_key       AES-256-GCM key k1 of sense-reconciler's source URIs at rest (its key ring)
#   compose.env                     YOVISION_UID/GID, KAFKA_VERSION, MEDIAMTX_IMAGE_TAG: no secret
# Keys are hex of 32 random bytes, the formats of the native path (yovision_platform.tools.devsecrets).
# Secret files are written with umask 077 (mode 0600). Existing secrets are kept: re-running changes nothing
# but compose.env.
#
# Usage: infra/docker/make-secrets.sh [--rotate-runtime <schema>]
#   --rotate-runtime sense   puts a new password into secrets/sense_runtime_dsn; then run the service's
#                            migrate job (it sets the role's password) and recreate the service
#                            (docs/runbooks/rotating-keys.md).
#
# Compose bind-mounts secret files with their host owner and mode, so the containers run as the files' owner
# (compose.env). Run as root, the files are given to uid/gid 10001, the images' own non-root user.
set -euo pipefail
umask 077

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="$REPO_ROOT/.local/docker"
SECRETS_DIR="$OUT_DIR/secrets"
SCHEMAS=(sense orphan bell signal media)
# yovision_platform.tools.identity_provider.clients: "-" in a client id is "_" in a compose secret's name
IDENTITY_CLIENTS=(console dev_token operator_cli bench)
IDENTITY_ROLE=hydra
IMAGE_USER_ID=10001
PG_HOST=postgres
PG_PORT=5432
PG_DATABASE=yovision

die() { echo "make-secrets: $*" >&2; exit 2; }

random_hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# write_secret PATH CONTENT: atomic replace, mode 0600, owned by the containers' user. CONTENT comes from a
# command substitution, whose failure `set -e` does not see: an empty one is refused, never kept as a secret.
write_secret() {
  local tmp
  [[ -n "$2" ]] || die "could not generate $1"
  tmp="$(mktemp "$1.XXXXXX")"
  printf '%s\n' "$2" >"$tmp"
  chmod 0600 "$tmp"
  [[ "$(id -u)" != 0 ]] || chown "$IMAGE_USER_ID:$IMAGE_USER_ID" "$tmp"
  mv -f "$tmp" "$1"
  echo "make-secrets: wrote $1"
}

# 32 random bytes, URL-safe base64 without padding: the format of Python's secrets.token_urlsafe(32).
urlsafe_token() { head -c 32 /dev/urandom | base64 | tr -d '\n=' | tr '+/' '-_'; }

runtime_dsn_of_role() { printf 'postgresql://%s:%s@%s:%s/%s' "$1" "$(random_hex 24)" "$PG_HOST" "$PG_PORT" "$PG_DATABASE"; }
runtime_dsn() { runtime_dsn_of_role "$1_app"; }

rotate=""
case "${1:-}" in
  "") ;;
  --rotate-runtime)
    rotate="${2:-}"
    [[ " ${SCHEMAS[*]} " == *" $rotate "* ]] || die "--rotate-runtime needs one of: ${SCHEMAS[*]}" ;;
  *) die "usage: $0 [--rotate-runtime <schema>]" ;;
esac

mkdir -p "$SECRETS_DIR"
chmod 0700 "$OUT_DIR" "$SECRETS_DIR"

if [[ -n "$rotate" ]]; then
  [[ -s "$SECRETS_DIR/${rotate}_runtime_dsn" ]] || die "no $SECRETS_DIR/${rotate}_runtime_dsn yet: run without options first"
  write_secret "$SECRETS_DIR/${rotate}_runtime_dsn" "$(runtime_dsn "$rotate")"
  exit 0
fi

password_file="$SECRETS_DIR/pg_superuser_password"
[[ -s "$password_file" ]] || write_secret "$password_file" "$(random_hex 24)"
admin_dsn="postgresql://postgres:$(head -n 1 "$password_file")@$PG_HOST:$PG_PORT/$PG_DATABASE"
if [[ ! -s "$SECRETS_DIR/pg_admin_dsn" || "$(head -n 1 "$SECRETS_DIR/pg_admin_dsn")" != "$admin_dsn" ]]; then
  write_secret "$SECRETS_DIR/pg_admin_dsn" "$admin_dsn"
fi
for schema in "${SCHEMAS[@]}"; do
  [[ -s "$SECRETS_DIR/${schema}_runtime_dsn" ]] || write_secret "$SECRETS_DIR/${schema}_runtime_dsn" "$(runtime_dsn "$schema")"
done
# The services' own secret files: exactly those their settings read (compose.yaml mounts them).
for key in bell_relay_key signal_secrets_aes_key sense_secrets_key console_session_key; do
  [[ -s "$SECRETS_DIR/$key" ]] || write_secret "$SECRETS_DIR/$key" "$(random_hex 32)"
done

# The identity provider (ORY Hydra): its role's DSN, its system secret, the configuration file that holds
# both (never an env value or an argument), and one secret per client.
[[ -s "$SECRETS_DIR/identity_provider_dsn" ]] \
  || write_secret "$SECRETS_DIR/identity_provider_dsn" "$(runtime_dsn_of_role "$IDENTITY_ROLE")"
[[ -s "$SECRETS_DIR/identity_provider_system_secret" ]] \
  || write_secret "$SECRETS_DIR/identity_provider_system_secret" "$(urlsafe_token)"
# JSON strings are YAML; the DSN and the secret hold no character that needs escaping (hex, URL-safe base64).
identity_config="$(printf 'dsn: "%s"\nsecrets:\n  system:\n    - "%s"' \
  "$(head -n 1 "$SECRETS_DIR/identity_provider_dsn")" "$(head -n 1 "$SECRETS_DIR/identity_provider_system_secret")")"
if [[ ! -s "$SECRETS_DIR/identity_provider_config" \
  || "$(cat "$SECRETS_DIR/identity_provider_config")" != "$identity_config" ]]; then
  write_secret "$SECRETS_DIR/identity_provider_config" "$identity_config"
fi
for client in "${IDENTITY_CLIENTS[@]}"; do
  [[ -s "$SECRETS_DIR/identity_client_$client" ]] \
    || write_secret "$SECRETS_DIR/identity_client_$client" "$(urlsafe_token)"
done

# Pinned versions come from the native path's single source of truth.
# shellcheck source-path=SCRIPTDIR source=../versions.env
source "$REPO_ROOT/infra/versions.env"
if [[ "$(id -u)" == 0 ]]; then owner_uid="$IMAGE_USER_ID" owner_gid="$IMAGE_USER_ID"
else owner_uid="$(id -u)" owner_gid="$(id -g)"; fi
cat >"$OUT_DIR/compose.env" <<ENV
# Written by infra/docker/make-secrets.sh; holds no secret. Pass it to compose with --env-file.
YOVISION_UID=$owner_uid
YOVISION_GID=$owner_gid
KAFKA_VERSION=$KAFKA_VERSION
MEDIAMTX_IMAGE_TAG=${MEDIAMTX_VERSION#v}
ENV
echo "make-secrets: wrote $OUT_DIR/compose.env (containers run as $owner_uid:$owner_gid)"
