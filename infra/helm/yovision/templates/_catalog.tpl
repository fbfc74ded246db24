{{/*
What the chart knows about each service, from the services' own settings classes (services/<name>/src/<package>/settings.py):
its env var prefix, its HTTP port (the image's default), the secret files its settings read (setting -> key in
the service's Secret, mounted at /run/secrets/yovision/<key>), and which external systems it talks to
(`database`: PostgreSQL, Kafka and a migration Job), whether it has a key ring of secrets at rest (`keyRing`:
<P>_SECRETS_KEY_FILES from the values' `secretsKeyIds`), and `audience`: its API takes the access tokens of
`auth.issuer` (<P>_AUTH_* settings from the values' `auth`) whose `aud` names this, the service's name, unless
`auth.audiences` names another. The console takes no access token: it signs users in at the issuer
(`oidc`). tests/deploy/ checks this against the settings classes.
*/}}
{{- define "yovision.catalog" -}}
sense-reconciler:
  prefix: SENSE
  port: 18081
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
  database: true
  mediamtx: true
  audience: sense-reconciler # the Control API
  keyRing: true
orphan-scanner:
  prefix: ORPHAN
  port: 18082
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
  database: true
  mediamtx: true
  audience: orphan-scanner # the read API of reports (GET /v1/reports...)
bell-receiver:
  prefix: BELL
  port: 18083
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
  database: true
  mediamtx: false
  audience: bell-receiver
signal-watcher:
  prefix: SIGNAL
  port: 18084
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
  database: true
  mediamtx: false
  audience: signal-watcher
  keyRing: true
media-worker:
  prefix: MEDIA
  port: 18085
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
  database: true
  mediamtx: false
  audience: media-worker
console:
  prefix: CONSOLE
  port: 18080
  secretFiles:
    SESSION_KEY_FILE: session-key
    OIDC_CLIENT_SECRET_FILE: oidc-client-secret
  database: false
  mediamtx: false
  oidc: true
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
