{{/*
What the chart knows about each service, from the services' own settings classes (services/<name>/src/<package>/settings.py):
its env var prefix, its HTTP port (the image's default), the secret files its settings read (setting -> key in
the service's Secret, mounted at /run/secrets/yovision/<key>), and which external systems it talks to.
tests/deploy/ checks this against the settings classes. The console (services/console/, not built yet) gets
its entry here once it exists: a user-facing API, no database schema of its own.
*/}}
{{- define "yovision.catalog" -}}
sense-reconciler:
  prefix: SENSE
  port: 18081
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    API_TOKEN_FILE: api-token
  mediamtx: true
  jwt: false
orphan-scanner:
  prefix: ORPHAN
  port: 18082
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key # the read API of reports (GET /v1/reports...)
  mediamtx: true
  jwt: true
bell-receiver:
  prefix: BELL
  port: 18083
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key
  mediamtx: false
  jwt: true
signal-watcher:
  prefix: SIGNAL
  port: 18084
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key
    SECRETS_AES_KEY_FILE: secrets-aes-key
  mediamtx: false
  jwt: true
media-worker:
  prefix: MEDIA
  port: 18085
  secretFiles:
    DATABASE_DSN_FILE: database-dsn
    AUTH_JWT_KEY_FILE: jwt-key
  mediamtx: false
  jwt: true
{{- end }}

{{/* The names of the enabled services, in a fixed order, as a JSON list (use with fromJsonArray). */}}
{{- define "yovision.enabledServiceNames" -}}
{{- $out := list -}}
{{- range $name := list "sense-reconciler" "orphan-scanner" "bell-receiver" "signal-watcher" "media-worker" -}}
{{- if (index $.Values.services $name).enabled -}}
{{- $out = append $out $name -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}
