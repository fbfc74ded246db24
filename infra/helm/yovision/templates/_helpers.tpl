{{/*
Names. The release part is cut to 28 characters so that every object name, and the pod names a Deployment
derives from it (<deployment>-<template hash>-<5 chars>), stay within 63 characters: media-worker's pod name is
its MEDIA_INSTANCE_ID, which allows at most 63.
*/}}
{{- define "yovision.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 28 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 28 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 28 | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/* <fullname>-<service> (argument: a service context, see the templates' `$svc`). */}}
{{- define "yovision.componentName" -}}
{{- printf "%s-%s" (include "yovision.fullname" .root) .name -}}
{{- end }}

{{- define "yovision.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name | quote }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/part-of: yovision
{{- end }}

{{/* Labels of a service's objects; `component` is the service name (the selector's discriminator). */}}
{{- define "yovision.labels" -}}
{{ include "yovision.commonLabels" .root }}
app.kubernetes.io/component: {{ .name | quote }}
{{- end }}

{{- define "yovision.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name | quote }}
app.kubernetes.io/instance: {{ .root.Release.Name | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: {{ .name | quote }}
{{- end }}

{{/* Labels of a service's migration Job and its pod: never matched by the service's own selector. */}}
{{- define "yovision.migrationLabels" -}}
{{ include "yovision.commonLabels" .root }}
app.kubernetes.io/component: {{ printf "%s-migrate" .name | quote }}
{{- end }}

{{- define "yovision.image" -}}
{{- $image := .root.Values.image -}}
{{- $own := .values.image | default dict -}}
{{- $repository := $own.repository | default (printf "%s/%s" $image.repositoryPrefix .name) -}}
{{- if $image.registry -}}{{- $repository = printf "%s/%s" $image.registry $repository -}}{{- end -}}
{{- $tag := $own.tag | default $image.tag | default .root.Chart.AppVersion -}}
{{- if $image.digests -}}{{- with index $image.digests .name -}}{{- $tag = printf "%s@%s" $tag . -}}{{- end -}}{{- end -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end }}

{{- define "yovision.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "yovision.fullname" .) -}}
{{- end }}

{{/* Where secret files are mounted: the service's own Secret, and (migration Jobs only) the admin DSN. */}}
{{- define "yovision.secretDir" -}}/run/secrets/yovision{{- end }}
{{- define "yovision.tlsDir" -}}/run/secrets/yovision-tls{{- end }}
{{- define "yovision.adminSecretDir" -}}/run/secrets/yovision-admin{{- end }}
{{- define "yovision.postgresCaDir" -}}/etc/yovision/postgres-ca{{- end }}
{{- define "yovision.kafkaCaDir" -}}/etc/yovision/kafka-ca{{- end }}
{{- define "yovision.kafkaTlsDir" -}}/run/secrets/yovision-kafka-tls{{- end }}
{{- define "yovision.bellCaDir" -}}/etc/yovision/bell-ca{{- end }}
{{- define "yovision.servicesCaDir" -}}/etc/yovision/services-ca{{- end }}
{{- define "yovision.mediaStorageDir" -}}/var/lib/yovision/media{{- end }}
{{- define "yovision.mediaRunDir" -}}/run/yovision{{- end }}
{{- define "yovision.drainDir" -}}/etc/yovision/drain{{- end }}

{{/*
<P>_KAFKA_BOOTSTRAP from kafka.bootstrap: a "host:port,host:port" string as it is, a list joined with commas.
*/}}
{{- define "yovision.kafkaBootstrap" -}}
{{- $bootstrap := .Values.kafka.bootstrap -}}
{{- if kindIs "slice" $bootstrap -}}{{- join "," $bootstrap -}}{{- else -}}{{- $bootstrap -}}{{- end -}}
{{- end }}

{{/*
Kafka security of a service that talks to Kafka (argument: a service context): "tls", "sasl", "ca" and
"clientCert" as "true" or "", after checking the values fit the protocol (the services refuse, at start-up,
TLS files without TLS and SASL settings without SASL; the chart refuses them at render time).
*/}}
{{- define "yovision.kafkaSecurity" -}}
{{- $security := .root.Values.kafka.security -}}
{{- $tls := has $security.protocol (list "SSL" "SASL_SSL") -}}
{{- $sasl := has $security.protocol (list "SASL_PLAINTEXT" "SASL_SSL") -}}
{{- $ca := or $security.caBundle.configMap $security.caBundle.secret -}}
{{- if and $security.caBundle.configMap $security.caBundle.secret -}}
{{- fail "kafka.security.caBundle: set configMap or secret, not both" -}}
{{- end -}}
{{- if and (not $tls) (or $ca $security.clientCertificate.secretName) -}}
{{- fail "kafka.security.caBundle and clientCertificate need protocol SSL or SASL_SSL" -}}
{{- end -}}
{{- if and $sasl (not (index $security.sasl.usernames .name | default $security.sasl.username)) -}}
{{- fail (printf "kafka.security.sasl.username (or usernames.%s) is required with protocol %s" .name $security.protocol) -}}
{{- end -}}
tls: {{ ternary "true" "" $tls | quote }}
sasl: {{ ternary "true" "" $sasl | quote }}
ca: {{ ternary "true" "" (and $tls (ne $ca "")) | quote }}
clientCert: {{ ternary "true" "" (and $tls (ne $security.clientCertificate.secretName "")) | quote }}
{{- end }}

{{- define "yovision.secretName" -}}
{{- .values.secretName | default (include "yovision.componentName" .) -}}
{{- end }}

{{/* The keys a service's Secret must hold (name -> file name), as a YAML map. */}}
{{- define "yovision.secretKeys" -}}
{{- $keys := dict -}}
{{- range $setting, $key := .spec.secretFiles -}}{{- $_ := set $keys $key $key -}}{{- end -}}
{{- if and (eq .name "sense-reconciler") .values.bellRelay.enabled -}}
{{- $_ := set $keys "bell-relay-key" "bell-relay-key" -}}
{{- end -}}
{{- if eq .name "bell-receiver" -}}
{{- range $id := .values.relayKeyIds -}}{{- $_ := set $keys (printf "relay-key-%s" $id) (printf "relay-key-%s" $id) -}}{{- end -}}
{{- end -}}
{{- if and .spec.database (fromYaml (include "yovision.kafkaSecurity" .)).sasl -}}
{{- $_ := set $keys "kafka-sasl-password" "kafka-sasl-password" -}}
{{- end -}}
{{- if .spec.keyRing -}}
{{- range $id := .values.secretsKeyIds -}}{{- $_ := set $keys (printf "secrets-key-%s" $id) (printf "secrets-key-%s" $id) -}}{{- end -}}
{{- end -}}
{{- if and (eq .name "signal-watcher") .values.legacyAesKey -}}
{{- $_ := set $keys "secrets-aes-key" "secrets-aes-key" -}}
{{- end -}}
{{- if eq .name "media-worker" -}}
{{- /* the preStop drain hook's client (files/media-drain.py), not a setting of the service */ -}}
{{- $_ := set $keys "drain-client-secret" "drain-client-secret" -}}
{{- end -}}
{{- if .spec.mediamtx -}}
{{- if and .root.Values.mediamtx.credentials (not .root.Values.mediamtx.servers) -}}
{{- $_ := set $keys "mediamtx-credentials" "mediamtx-credentials" -}}
{{- end -}}
{{- range $id, $server := .root.Values.mediamtx.servers -}}
{{- if $server.credentials -}}{{- $_ := set $keys (printf "mediamtx-%s-credentials" $id) (printf "mediamtx-%s-credentials" $id) -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $keys -}}
{{- end }}

{{/*
The container environment of a service: the same for `serve` and for its migration Job (`migrate` loads the
same settings and reads the same secret files), plus the admin DSN for the Job only (argument key
`migrate`). Secret files are named by path; no secret value is ever an env value.
*/}}
{{- define "yovision.env" -}}
{{- $p := .spec.prefix -}}
{{- $root := .root -}}
{{- $secretDir := include "yovision.secretDir" . -}}
- name: {{ $p }}_HTTP_HOST
  value: "0.0.0.0"
- name: {{ $p }}_HTTP_PORT
  value: {{ .spec.port | quote }}
{{- if .spec.database }}
- name: {{ $p }}_KAFKA_BOOTSTRAP
  value: {{ required "kafka.bootstrap is required" (include "yovision.kafkaBootstrap" $root) | quote }}
{{- with $root.Values.kafka.prefix }}
- name: {{ $p }}_KAFKA_PREFIX
  value: {{ . | quote }}
{{- end }}
{{- $kafka := fromYaml (include "yovision.kafkaSecurity" .) }}
{{- $security := $root.Values.kafka.security }}
{{- if ne $security.protocol "PLAINTEXT" }}
- name: {{ $p }}_KAFKA_SECURITY_PROTOCOL
  value: {{ $security.protocol | quote }}
{{- end }}
{{- if $kafka.ca }}
- name: {{ $p }}_KAFKA_SSL_CA_FILE
  value: {{ printf "%s/%s" (include "yovision.kafkaCaDir" .) $security.caBundle.key | quote }}
{{- end }}
{{- if $kafka.clientCert }}
- name: {{ $p }}_KAFKA_SSL_CERT_FILE
  value: {{ printf "%s/tls.crt" (include "yovision.kafkaTlsDir" .) | quote }}
- name: {{ $p }}_KAFKA_SSL_KEY_FILE
  value: {{ printf "%s/tls.key" (include "yovision.kafkaTlsDir" .) | quote }}
{{- end }}
{{- if $kafka.sasl }}
- name: {{ $p }}_KAFKA_SASL_MECHANISM
  value: {{ $security.sasl.mechanism | quote }}
- name: {{ $p }}_KAFKA_SASL_USERNAME
  value: {{ index $security.sasl.usernames .name | default $security.sasl.username | quote }}
- name: {{ $p }}_KAFKA_SASL_PASSWORD_FILE
  value: {{ printf "%s/kafka-sasl-password" $secretDir | quote }}
{{- end }}
{{- with .values.databaseSchema }}
- name: {{ $p }}_DATABASE_SCHEMA
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- range $setting, $key := .spec.secretFiles }}
- name: {{ $p }}_{{ $setting }}
  value: {{ printf "%s/%s" $secretDir $key | quote }}
{{- end }}
{{- if (.values.tls).secretName }}
- name: {{ $p }}_HTTP_TLS_CERT_FILE
  value: {{ printf "%s/tls.crt" (include "yovision.tlsDir" .) | quote }}
- name: {{ $p }}_HTTP_TLS_KEY_FILE
  value: {{ printf "%s/tls.key" (include "yovision.tlsDir" .) | quote }}
{{- end }}
{{- if .spec.audience }}
{{- include "yovision.accessTokenEnv" (dict "prefix" $p "auth" $root.Values.auth "name" .name) }}
{{- end }}
{{- if .spec.oidc }}
- name: CONSOLE_OIDC_ISSUER
  value: {{ required "auth.issuer is required" $root.Values.auth.issuer | quote }}
- name: CONSOLE_OIDC_CLIENT_ID
  value: {{ required "services.console.oidc.clientId is required" .values.oidc.clientId | quote }}
{{- $audiences := list }}
{{- range $target := list "sense-reconciler" "orphan-scanner" "bell-receiver" "signal-watcher" "media-worker" }}
{{- $audiences = append $audiences (include "yovision.audience" (dict "root" $root "name" $target)) }}
{{- end }}
- name: CONSOLE_OIDC_AUDIENCES # what a sign-in asks the access token to be for: the five services
  value: {{ $audiences | uniq | join "," | quote }}
- name: CONSOLE_OIDC_PERMISSIONS_CLAIM # the user's permissions, read as the services read them
  value: {{ $root.Values.auth.permissionsClaim | quote }}
{{- with $root.Values.auth.permissionsMap }}
- name: CONSOLE_OIDC_PERMISSIONS_MAP
  value: {{ toJson . | quote }}
{{- end }}
{{- with include "yovision.consolePublicUrl" $root }}
- name: CONSOLE_PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if .spec.mediamtx }}
{{- with $root.Values.mediamtx.servers }}
{{- $servers := dict }}
{{- range $id, $server := . }}
{{- $entry := dict "api_url" $server.apiUrl }}
{{- if $server.credentials }}{{- $_ := set $entry "credentials_file" (printf "%s/mediamtx-%s-credentials" $secretDir $id) }}{{- end }}
{{- $_ := set $servers $id $entry }}
{{- end }}
- name: {{ $p }}_MEDIA_SERVERS
  value: {{ toJson $servers | quote }}
{{- else }}
- name: {{ $p }}_MEDIAMTX_API_URL
  value: {{ required "mediamtx.apiUrl is required" $root.Values.mediamtx.apiUrl | quote }}
{{- if $root.Values.mediamtx.credentials }}
- name: {{ $p }}_MEDIAMTX_CREDENTIALS_FILE
  value: {{ printf "%s/mediamtx-credentials" $secretDir | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if .spec.keyRing }}
{{- if .values.secretsKeyIds }}
{{- $files := dict }}
{{- range $id := .values.secretsKeyIds }}{{- $_ := set $files $id (printf "%s/secrets-key-%s" $secretDir $id) }}{{- end }}
- name: {{ $p }}_SECRETS_KEY_FILES
  value: {{ toJson $files | quote }}
{{- with .values.secretsActiveKeyId }}
- name: {{ $p }}_SECRETS_ACTIVE_KEY_ID
  value: {{ . | quote }}
{{- end }}
{{- else if not (and (eq .name "signal-watcher") .values.legacyAesKey) }}
{{- fail (printf "services.%s.secretsKeyIds needs at least one key id" .name) }}
{{- end }}
{{- if and (eq .name "signal-watcher") .values.legacyAesKey }}
- name: SIGNAL_SECRETS_AES_KEY_FILE
  value: {{ printf "%s/secrets-aes-key" $secretDir | quote }}
{{- end }}
{{- end }}
{{- if eq .name "sense-reconciler" }}
{{- with .values.bellRelay }}
{{- if .enabled }}
- name: SENSE_AUDIT_PUSH_ENABLED
  value: "true"
- name: SENSE_BELL_URL
  value: {{ include "yovision.bellRelayUrl" $ | quote }}
- name: SENSE_BELL_KEY_ID
  value: {{ required "services.sense-reconciler.bellRelay.keyId is required when the relay is enabled" .keyId | quote }}
- name: SENSE_BELL_KEY_FILE
  value: {{ printf "%s/bell-relay-key" $secretDir | quote }}
{{- if .caBundle.configMap }}
- name: SSL_CERT_FILE
  value: {{ printf "%s/%s" (include "yovision.bellCaDir" $) .caBundle.key | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .name "console" }}
{{- range $target, $setting := dict "sense-reconciler" "SENSE_URL" "orphan-scanner" "ORPHAN_URL" "bell-receiver" "BELL_URL" "signal-watcher" "SIGNAL_URL" "media-worker" "MEDIA_URL" }}
- name: CONSOLE_{{ $setting }}
  value: {{ include "yovision.serviceHttpsUrl" (dict "root" $root "name" $target) | quote }}
{{- end }}
{{- if .values.caBundle.configMap }}
- name: SSL_CERT_FILE
  value: {{ printf "%s/%s" (include "yovision.servicesCaDir" .) .values.caBundle.key | quote }}
{{- end }}
{{- end }}
{{- if eq .name "bell-receiver" }}
{{- $files := dict }}
{{- range $id := .values.relayKeyIds }}{{- $_ := set $files $id (printf "%s/relay-key-%s" $secretDir $id) }}{{- end }}
- name: BELL_AUDIT_PUSH_KEY_FILES
  value: {{ toJson $files | quote }}
{{- end }}
{{- if eq .name "media-worker" }}
- name: MEDIA_STORAGE_DIR
  value: {{ include "yovision.mediaStorageDir" . | quote }}
- name: MEDIA_CAPABILITY_FILE
  value: {{ printf "%s/media-worker.capability" (include "yovision.mediaRunDir" .) | quote }}
- name: MEDIA_INSTANCE_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
{{- if not .migrate }}
{{- include "yovision.tracingEnv" (dict "prefix" $p "tracing" $root.Values.tracing) }}
{{- end }}
{{- range $name, $value := .values.settings }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- if .migrate }}
- name: {{ $p }}_MIGRATION_DSN_FILE
  value: {{ printf "%s/%s" (include "yovision.adminSecretDir" .) $root.Values.migrations.adminSecret.key | quote }}
{{- end }}
{{- end }}

{{/*
The <P>_AUTH_* settings of a service that takes access tokens (`AccessTokenSettings`), from the values' `auth`
(argument: dict prefix, auth, name). Optional values are rendered only when set, so the service's own default
holds otherwise: without auth.audiences.<service>, the audience is the service's name.
*/}}
{{- define "yovision.accessTokenEnv" -}}
{{- $p := .prefix }}
{{- $name := .name }}
{{- with .auth }}
- name: {{ $p }}_AUTH_ISSUER
  value: {{ required "auth.issuer is required" .issuer | quote }}
{{- with index (.audiences | default dict) $name }}
- name: {{ $p }}_AUTH_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- with .jwksUrl }}
- name: {{ $p }}_AUTH_JWKS_URL
  value: {{ . | quote }}
{{- end }}
- name: {{ $p }}_AUTH_ALGORITHMS
  value: {{ join "," .algorithms | quote }}
- name: {{ $p }}_AUTH_LEEWAY_SECONDS
  value: {{ .leewaySeconds | toString | quote }}
- name: {{ $p }}_AUTH_PERMISSIONS_CLAIM
  value: {{ .permissionsClaim | quote }}
{{- with .permissionsMap }}
- name: {{ $p }}_AUTH_PERMISSIONS_MAP
  value: {{ toJson . | quote }}
{{- end }}
- name: {{ $p }}_AUTH_JWKS_REFRESH_SECONDS
  value: {{ .jwksRefreshSeconds | toString | quote }}
{{- end }}
{{- end }}

{{/*
The <P>_TRACING_* settings of a serving process (argument: dict prefix, tracing), only while
tracing.otlpEndpoint is set: without it the service's own default holds, tracing off. Not for `migrate`,
which makes no span.
*/}}
{{- define "yovision.tracingEnv" -}}
{{- with .tracing }}
{{- if .otlpEndpoint }}
- name: {{ $.prefix }}_TRACING_OTLP_ENDPOINT
  value: {{ .otlpEndpoint | quote }}
- name: {{ $.prefix }}_TRACING_SAMPLING_RATIO
  value: {{ .samplingRatio | toString | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
https://<service>.<namespace>.svc:<port> of an enabled service that serves TLS (the console and Sense's push
refuse plain HTTP to anything but loopback). Argument: dict root, name.
*/}}
{{- define "yovision.serviceHttpsUrl" -}}
{{- $values := index .root.Values.services .name -}}
{{- if not $values.enabled -}}{{- fail (printf "the console needs %s: enable it" .name) -}}{{- end -}}
{{- if not ($values.tls).secretName -}}
{{- fail (printf "the console calls %s over HTTPS: set services.%s.tls.secretName" .name .name) -}}
{{- end -}}
{{- $catalog := fromYaml (include "yovision.catalog" .root) -}}
{{- printf "https://%s.%s.svc:%v" (include "yovision.componentName" .) .root.Release.Namespace (index $catalog .name).port -}}
{{- end }}

{{/* The `aud` a service requires (argument: dict root, name): auth.audiences.<name>, else its name. */}}
{{- define "yovision.audience" -}}
{{- index (.root.Values.auth.audiences | default dict) .name | default .name -}}
{{- end }}

{{/*
The console's URL as browsers reach it (its OIDC redirect URI is <this>/oidc/callback): publicUrl, else
https://<ingress.consoleHost> when the Ingress routes it (TLS ends at the Ingress or in front of it); empty:
the console takes its request's own URL.
*/}}
{{- define "yovision.consolePublicUrl" -}}
{{- $console := .Values.services.console -}}
{{- if $console.publicUrl -}}
{{- $console.publicUrl | trimSuffix "/" -}}
{{- else if and .Values.ingress.enabled .Values.ingress.consoleHost -}}
{{- printf "https://%s" .Values.ingress.consoleHost -}}
{{- end -}}
{{- end }}

{{/*
Sense's URL of Bell: bellRelay.url, else bell-receiver's Service over HTTPS when Bell serves TLS (the relay
refuses plain HTTP to anything but loopback). Argument: sense-reconciler's service context.
*/}}
{{- define "yovision.bellRelayUrl" -}}
{{- $bell := index .root.Values.services "bell-receiver" -}}
{{- if .values.bellRelay.url -}}
{{- .values.bellRelay.url -}}
{{- else if and $bell.enabled ($bell.tls).secretName -}}
{{- include "yovision.serviceHttpsUrl" (dict "root" .root "name" "bell-receiver") -}}
{{- else -}}
{{- fail "services.sense-reconciler.bellRelay.url is required when the relay is enabled, unless bell-receiver serves TLS (services.bell-receiver.tls.secretName)" -}}
{{- end -}}
{{- end }}

{{/* The probes' scheme: HTTPS when the service serves TLS (the kubelet does not verify the certificate). */}}
{{- define "yovision.scheme" -}}
{{- if (.values.tls).secretName }}HTTPS{{ else }}HTTP{{ end -}}
{{- end }}

{{/*
A service's pod annotations (argument: a service context), as YAML, empty when none: its podAnnotations, and
with monitoring.scrapeAnnotations.enabled the prometheus.io/* ones that Prometheus's pod discovery reads
(scrape, port, path, scheme). An annotation podAnnotations names itself keeps the value given there.
*/}}
{{- define "yovision.podAnnotations" -}}
{{- $annotations := deepCopy (.values.podAnnotations | default dict) -}}
{{- if .root.Values.monitoring.scrapeAnnotations.enabled -}}
{{- $scrape := dict
      "prometheus.io/scrape" "true"
      "prometheus.io/port" (toString .spec.port)
      "prometheus.io/path" "/metrics"
      "prometheus.io/scheme" (lower (include "yovision.scheme" .)) -}}
{{- $annotations = merge $annotations $scrape -}}
{{- end -}}
{{- with $annotations -}}{{- toYaml . -}}{{- end -}}
{{- end }}

{{/* Volumes every pod of a service has (Secret, /tmp, CA bundles); the admin DSN only with `migrate`. */}}
{{- define "yovision.volumes" -}}
- name: secrets
  secret:
    secretName: {{ include "yovision.secretName" . }}
    defaultMode: 288 # 0440: group-readable (fsGroup), nothing for others; the services refuse o+r files
    items:
{{- range $key, $_ := fromYaml (include "yovision.secretKeys" .) }}
      - key: {{ $key }}
        path: {{ $key }}
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .values.tmpSizeLimit | default .root.Values.tmpSizeLimit }}
{{- with (.values.tls).secretName }}
- name: tls
  secret:
    secretName: {{ . }}
    defaultMode: 288 # 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- with .root.Values.postgres.caBundle }}
{{- if and .configMap $.spec.database }}
- name: postgres-ca
  configMap:
    name: {{ .configMap }}
{{- end }}
{{- end }}
{{- if .spec.database }}
{{- $kafka := fromYaml (include "yovision.kafkaSecurity" .) }}
{{- with .root.Values.kafka.security }}
{{- if $kafka.ca }}
- name: kafka-ca
{{- if .caBundle.configMap }}
  configMap:
    name: {{ .caBundle.configMap }}
{{- else }}
  secret:
    secretName: {{ .caBundle.secret }}
    defaultMode: 292 # 0444: a CA certificate is public
{{- end }}
    items:
      - key: {{ .caBundle.key }}
        path: {{ .caBundle.key }}
{{- end }}
{{- if $kafka.clientCert }}
- name: kafka-tls
  secret:
    secretName: {{ .clientCertificate.secretName }}
    defaultMode: 288 # 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end }}
{{- end }}
{{- if and (eq .name "sense-reconciler") .values.bellRelay.enabled .values.bellRelay.caBundle.configMap }}
- name: bell-ca
  configMap:
    name: {{ .values.bellRelay.caBundle.configMap }}
{{- end }}
{{- if and (eq .name "console") .values.caBundle.configMap }}
- name: services-ca
  configMap:
    name: {{ .values.caBundle.configMap }}
{{- end }}
{{- if .migrate }}
- name: admin-secret
  secret:
    secretName: {{ required "migrations.adminSecret.name is required" .root.Values.migrations.adminSecret.name }}
    defaultMode: 288 # 0440
    items:
      - key: {{ .root.Values.migrations.adminSecret.key }}
        path: {{ .root.Values.migrations.adminSecret.key }}
{{- end }}
{{- end }}

{{- define "yovision.volumeMounts" -}}
- name: secrets
  mountPath: {{ include "yovision.secretDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if (.values.tls).secretName }}
- name: tls
  mountPath: {{ include "yovision.tlsDir" . }}
  readOnly: true
{{- end }}
{{- if and .root.Values.postgres.caBundle.configMap .spec.database }}
- name: postgres-ca
  mountPath: {{ include "yovision.postgresCaDir" . }}
  readOnly: true
{{- end }}
{{- if .spec.database }}
{{- $kafka := fromYaml (include "yovision.kafkaSecurity" .) }}
{{- if $kafka.ca }}
- name: kafka-ca
  mountPath: {{ include "yovision.kafkaCaDir" . }}
  readOnly: true
{{- end }}
{{- if $kafka.clientCert }}
- name: kafka-tls
  mountPath: {{ include "yovision.kafkaTlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}
{{- if and (eq .name "sense-reconciler") .values.bellRelay.enabled .values.bellRelay.caBundle.configMap }}
- name: bell-ca
  mountPath: {{ include "yovision.bellCaDir" . }}
  readOnly: true
{{- end }}
{{- if and (eq .name "console") .values.caBundle.configMap }}
- name: services-ca
  mountPath: {{ include "yovision.servicesCaDir" . }}
  readOnly: true
{{- end }}
{{- if .migrate }}
- name: admin-secret
  mountPath: {{ include "yovision.adminSecretDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Non-root (the images' uid/gid 10001), no privilege escalation, no capability, read-only root fs. */}}
{{- define "yovision.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "yovision.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}
