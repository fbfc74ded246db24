{{/*
What the chart knows about each service, from the services' own settings classes (services/<name>/src/<package>/settings.py):
its env var prefix, its HTTP port (the image's default), the secret files its settings read (setting -> key in
the service's Secret, mounted at /run/secrets/yovision/<key>), and which external systems it talks to
(`database`: PostgreSQL, Kafka and a migration Job), and whether it has a key ring of secrets at rest (`keyRing`:
<P>_SECRETS_KEY_FILES from the values' `secretsKeyIds`). tests/deploy/ checks this against the settings classes.
*/}}
{{- define "yovision.catalog" -}}
sense-reconciler:
  prefix: SENSE
  port: 18081
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    API_TOKEN_FILE: api-token
  database: true
  mediamtx: true
  jwt: false
  keyRing: true
orphan-scanner:
  prefix: ORPHAN
  port: 18082
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key # the read API of reports (GET /v1/reports...)
  database: true
  mediamtx: true
  jwt: true
bell-receiver:
  prefix: BELL
  port: 18083
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key
  database: true
  mediamtx: false
  jwt: true
signal-watcher:
  prefix: SIGNAL
  port: 18084
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key
  database: true
  mediamtx: false
  jwt: true
  keyRing: true
media-worker:
  prefix: MEDIA
  port: 18085
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key
  database: true
  mediamtx: false
  jwt: true
console:
  prefix: CONSOLE
  port: 18080
  secretFiles:
    SESSION_KEY_FILE: session-key
    SENSE_API_TOKEN_FILE: sense-api-token
    AUTH_JWT_KEY_FILE: jwt-key
  database: false
  mediamtx: false
  jwt: true
{{- end }}

{{/* The names of the enabled services, in a fixed order, as a JSON list (use with fromJsonArray). */}}
{{- define "yovision.enabledServiceNames" -}}
{{- $out := list -}}
{{- range $name := list "sense-reconciler" "orphan-scanner" "bell-receiver" "signal-watcher" "media-worker" "console" -}}
{{- if (index $.Values.services $name).enabled -}}
{{- $out = append $out $name -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}
