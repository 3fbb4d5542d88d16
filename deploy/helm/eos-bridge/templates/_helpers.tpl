{{/*
Chart name, truncated to the 63 characters a DNS label allows.
*/}}
{{- define "eos-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: release-chart, unless the release name already contains the chart
name. Truncated to 52 characters: StatefulSet pods add "-<ordinal>" and the controller adds a
revision-hash label of the name plus 11 characters, which must still fit in 63.
*/}}
{{- define "eos-bridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "eos-bridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels shared by every resource of the release; the component label is added per workload.
*/}}
{{- define "eos-bridge.commonLabels" -}}
helm.sh/chart: {{ include "eos-bridge.chart" . }}
app.kubernetes.io/name: {{ include "eos-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: eos-bridge
{{- end }}

{{- define "eos-bridge.labels" -}}
{{ include "eos-bridge.commonLabels" . }}
app.kubernetes.io/component: bridge
{{- end }}

{{- define "eos-bridge.sparkLabels" -}}
{{ include "eos-bridge.commonLabels" . }}
app.kubernetes.io/component: spark-aggregation
{{- end }}

{{/*
Selector labels of the bridge pods. Never change these on an installed release: a StatefulSet's
selector and its volumeClaimTemplates are immutable.
*/}}
{{- define "eos-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eos-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: bridge
{{- end }}

{{- define "eos-bridge.sparkSelectorLabels" -}}
app.kubernetes.io/name: {{ include "eos-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: spark-aggregation
{{- end }}

{{- define "eos-bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "eos-bridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Image reference: repository@digest when a digest is set, else repository:tag (tag defaults to
the chart's appVersion). Call with (dict "image" .Values.image "context" $).
*/}}
{{- define "eos-bridge.imageRef" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .context.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/*
The Spark image (spark.image or sparkApplication.image): what it sets, the rest from the
bridge's image, which is built from the same release: repository `<image.repository>-spark`,
tag image.tag, then the chart's appVersion (a digest is never carried over: it names the bridge
image). Call with (dict "image" .Values.spark.image "context" $).
*/}}
{{- define "eos-bridge.sparkImageRef" -}}
{{- $bridge := .context.Values.image }}
{{- $image := dict "repository" (default (printf "%s-spark" $bridge.repository) .image.repository) "tag" (default $bridge.tag .image.tag) "digest" .image.digest }}
{{- include "eos-bridge.imageRef" (dict "image" $image "context" .context) }}
{{- end }}

{{/*
Default consumer group: namespace and full name, so two releases of the same name in two
namespaces on one Kafka cluster neither share a group nor fence each other. The
transactional.id prefix follows the bridge's own rule (app/config.py, app/engine/stores.py):
bridge.transactionalIdPrefix when set, else the group.
*/}}
{{- define "eos-bridge.defaultId" -}}
{{- printf "%s.%s" .Release.Namespace (include "eos-bridge.fullname" .) }}
{{- end }}

{{- define "eos-bridge.groupId" -}}
{{- default (include "eos-bridge.defaultId" .) .Values.bridge.groupId }}
{{- end }}

{{/*
BRIDGE_TRANSACTIONAL_ID_PREFIX: bridge.transactionalIdPrefix as set; empty, the bridge takes
the group (its own rule).
*/}}
{{- define "eos-bridge.transactionalIdPrefix" -}}
{{- .Values.bridge.transactionalIdPrefix }}
{{- end }}

{{/*
The transactional ids the bridge uses, for NOTES and docs: one cluster
<prefix or group>-<pod name>; two clusters one per input partition,
[<prefix>-]<group>-task-<n>.
*/}}
{{- define "eos-bridge.transactionalIds" -}}
{{- $prefix := .Values.bridge.transactionalIdPrefix }}
{{- if include "eos-bridge.twoClusters" . }}
{{- if $prefix }}{{ $prefix }}-{{ end }}{{ include "eos-bridge.groupId" . }}-task-<n>
{{- else }}
{{- printf "%s-<pod name>" (default (include "eos-bridge.groupId" .) $prefix) }}
{{- end }}
{{- end }}

{{/*
Worst-case time from SIGTERM to exit, in whole seconds (see docs/deploy.md, "Shutdown"): the
bridge's watchdog ends the process within shutdownTimeout of the signal whatever it is doing,
plus 10 s for the watchdog's tick and the process teardown.
*/}}
{{- define "eos-bridge.shutdownBound" -}}
{{- addf .Values.bridge.shutdownTimeout 10 | ceil | int64 }}
{{- end }}

{{- define "eos-bridge.terminationGracePeriodSeconds" -}}
{{- $bound := include "eos-bridge.shutdownBound" . | int64 }}
{{- if .Values.terminationGracePeriodSeconds }}
{{- if lt (int64 .Values.terminationGracePeriodSeconds) $bound }}
{{- fail (printf "terminationGracePeriodSeconds (%v) is shorter than the bridge's worst-case shutdown (%d s: bridge.shutdownTimeout + 10 s): Kubernetes would SIGKILL a final checkpoint. Leave it empty to derive it, or lower bridge.shutdownTimeout" .Values.terminationGracePeriodSeconds $bound) }}
{{- end }}
{{- .Values.terminationGracePeriodSeconds | int64 }}
{{- else }}
{{- $bound }}
{{- end }}
{{- end }}

{{/*
security.protocol implied by the sasl and tls values ("" when neither is on). protocolOf takes
one cluster's (dict "sasl" ... "tls" ...): the source's (sasl, tls) or the target's.
*/}}
{{- define "eos-bridge.protocolOf" -}}
{{- if .sasl.enabled }}
{{- .sasl.securityProtocol }}
{{- else if .tls.enabled }}
{{- "SSL" }}
{{- end }}
{{- end }}

{{- define "eos-bridge.securityProtocol" -}}
{{- include "eos-bridge.protocolOf" (dict "sasl" .Values.sasl "tls" .Values.tls) }}
{{- end }}

{{- define "eos-bridge.tlsDir" -}}/etc/eos-bridge/tls{{- end }}
{{- define "eos-bridge.targetTlsDir" -}}/etc/eos-bridge/target-tls{{- end }}

{{/*
"true" when target.bootstrapServers names a second cluster (docs/cross-cluster.md), else "".
*/}}
{{- define "eos-bridge.twoClusters" -}}
{{- if .Values.target.bootstrapServers }}true{{ end }}
{{- end }}

{{/*
librdkafka TLS settings for the mounted Secrets: paths only, never a secret (the key password
reaches the bridge as an environment variable from its Secret).
*/}}
{{- define "eos-bridge.tlsSettings" -}}
{{- include "eos-bridge.tlsSettingsOf" (dict "tls" .Values.tls "dir" (include "eos-bridge.tlsDir" .)) }}
{{- end }}

{{- define "eos-bridge.tlsSettingsOf" -}}
{{- $tls := .tls }}
{{- $dir := .dir }}
{{- $out := dict }}
{{- if $tls.enabled }}
{{- if $tls.caSecret }}
{{- $_ := set $out "ssl.ca.location" (printf "%s/ca.crt" $dir) }}
{{- end }}
{{- if $tls.clientSecret }}
{{- $_ := set $out "ssl.certificate.location" (printf "%s/client.crt" $dir) }}
{{- $_ := set $out "ssl.key.location" (printf "%s/client.key" $dir) }}
{{- end }}
{{- $_ := set $out "ssl.endpoint.identification.algorithm" (ternary "https" "none" $tls.verifyHostname) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Contents of the bridge's config file (BRIDGE_CONFIG_FILE): the librdkafka maps that have no
environment-variable form. Security protocol, SASL mechanism and the TLS file paths join the
common map; credentials and the key password come from Secrets as environment variables, never
from here.
*/}}
{{- define "eos-bridge.configFile" -}}
{{- $kafka := include "eos-bridge.kafkaMapOf" (dict "kafka" .Values.bridge.kafka "sasl" .Values.sasl "tls" .Values.tls "dir" (include "eos-bridge.tlsDir" .)) | fromYaml }}
{{- $file := dict "kafka" $kafka "consumer" .Values.bridge.consumer "producer" .Values.bridge.producer }}
{{- if include "eos-bridge.twoClusters" . }}
{{- $t := .Values.target }}
{{- $targetKafka := include "eos-bridge.kafkaMapOf" (dict "kafka" $t.kafka "sasl" $t.sasl "tls" $t.tls "dir" (include "eos-bridge.targetTlsDir" .)) | fromYaml }}
{{- $_ := set $file "target" (dict "kafka" $targetKafka) }}
{{- end }}
{{- with .Values.schemaRegistry }}
{{- if .url }}
{{- $registry := dict "url" .url }}
{{- if .caSecret }}
{{- $_ := set $registry "ca_location" (printf "%s/ca.crt" (include "eos-bridge.registryTlsDir" $)) }}
{{- end }}
{{- $_ := set $file "schema_registry" $registry }}
{{- end }}
{{- end }}
{{- $file | toYaml }}
{{- end }}

{{/*
One cluster's librdkafka map: its kafka values plus the security protocol, SASL mechanism and
TLS file paths its sasl and tls values imply. Call with (dict "kafka" "sasl" "tls" "dir").
*/}}
{{- define "eos-bridge.kafkaMapOf" -}}
{{- $kafka := deepCopy .kafka }}
{{- with include "eos-bridge.protocolOf" . }}
{{- $_ := set $kafka "security.protocol" . }}
{{- end }}
{{- if .sasl.enabled }}
{{- $_ := set $kafka "sasl.mechanisms" .sasl.mechanism }}
{{- end }}
{{- $kafka = merge $kafka (include "eos-bridge.tlsSettingsOf" . | fromYaml) }}
{{- toYaml $kafka }}
{{- end }}

{{/*
The target cluster (target.*): where it is, the offsets store settings, and its credentials,
each from the target's own Secrets (BRIDGE_TARGET__*; the bridge only, not the Spark job).
*/}}
{{- define "eos-bridge.targetEnv" -}}
{{- if include "eos-bridge.twoClusters" . }}
{{- $t := .Values.target }}
- name: BRIDGE_TARGET__BOOTSTRAP_SERVERS
  value: {{ $t.bootstrapServers | quote }}
{{- with $t.offsetsTopic }}
- name: BRIDGE_OFFSETS_TOPIC
  value: {{ . | quote }}
{{- end }}
- name: BRIDGE_MIRROR_OFFSETS_TO_SOURCE
  value: {{ $t.mirrorOffsetsToSource | quote }}
{{- if $t.sasl.enabled }}
- name: BRIDGE_TARGET__SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $t.sasl.existingSecret }}
      key: {{ $t.sasl.usernameKey }}
- name: BRIDGE_TARGET__SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $t.sasl.existingSecret }}
      key: {{ $t.sasl.passwordKey }}
{{- end }}
{{- if and $t.tls.enabled $t.tls.keyPasswordSecret.name }}
- name: BRIDGE_TARGET__KAFKA__ssl.key.password
  valueFrom:
    secretKeyRef:
      name: {{ $t.tls.keyPasswordSecret.name }}
      key: {{ $t.tls.keyPasswordSecret.key }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Environment variables carrying Kafka credentials, each from a Secret (bridge, Spark job and the
helm test pod share them).
*/}}
{{- define "eos-bridge.credentialEnv" -}}
{{- if .Values.sasl.enabled }}
- name: BRIDGE_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ .Values.sasl.existingSecret }}
      key: {{ .Values.sasl.usernameKey }}
- name: BRIDGE_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.sasl.existingSecret }}
      key: {{ .Values.sasl.passwordKey }}
{{- end }}
{{- if and .Values.schemaRegistry.url .Values.schemaRegistry.basicAuthSecret.name }}
- name: BRIDGE_SCHEMA_REGISTRY__BASIC_AUTH
  valueFrom:
    secretKeyRef:
      name: {{ .Values.schemaRegistry.basicAuthSecret.name }}
      key: {{ .Values.schemaRegistry.basicAuthSecret.key }}
{{- end }}
{{- if and .Values.tls.enabled .Values.tls.keyPasswordSecret.name }}
# The bridge reads nested settings as BRIDGE_<MAP>__<key>: this is kafka: {ssl.key.password}.
- name: BRIDGE_KAFKA__ssl.key.password
  valueFrom:
    secretKeyRef:
      name: {{ .Values.tls.keyPasswordSecret.name }}
      key: {{ .Values.tls.keyPasswordSecret.key }}
{{- end }}
{{- end }}

{{/*
The TLS Secrets as one read-only volume: ca.crt, client.crt, client.key.
*/}}
{{- define "eos-bridge.tlsVolume" -}}
{{- include "eos-bridge.tlsVolumeOf" (dict "name" "kafka-tls" "tls" .Values.tls) }}
{{- end }}

{{/*
The target's TLS Secrets (target.tls), the same way: the bridge and its helm test only.
*/}}
{{- define "eos-bridge.targetTlsVolume" -}}
{{- if include "eos-bridge.twoClusters" . }}
{{- include "eos-bridge.tlsVolumeOf" (dict "name" "target-kafka-tls" "tls" .Values.target.tls) }}
{{- end }}
{{- end }}

{{- define "eos-bridge.targetTlsVolumeMount" -}}
{{- $tls := .Values.target.tls }}
{{- if and (include "eos-bridge.twoClusters" .) $tls.enabled (or $tls.caSecret $tls.clientSecret) }}
- name: target-kafka-tls
  mountPath: {{ include "eos-bridge.targetTlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "eos-bridge.tlsVolumeOf" -}}
{{- $tls := .tls }}
{{- if and $tls.enabled (or $tls.caSecret $tls.clientSecret) }}
- name: {{ .name }}
  projected:
    defaultMode: 0440
    sources:
      {{- with $tls.caSecret }}
      - secret:
          name: {{ . }}
          items:
            - key: {{ $tls.caKey }}
              path: ca.crt
      {{- end }}
      {{- with $tls.clientSecret }}
      - secret:
          name: {{ . }}
          items:
            - key: {{ $tls.certKey }}
              path: client.crt
            - key: {{ $tls.keyKey }}
              path: client.key
      {{- end }}
{{- end }}
{{- end }}

{{- define "eos-bridge.registryTlsDir" -}}/etc/eos-bridge/registry-tls{{- end }}

{{/*
The registry's CA bundle (schemaRegistry.caSecret) as a read-only volume: ca.crt.
*/}}
{{- define "eos-bridge.registryTlsVolume" -}}
{{- if and .Values.schemaRegistry.url .Values.schemaRegistry.caSecret }}
- name: registry-tls
  secret:
    secretName: {{ .Values.schemaRegistry.caSecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.schemaRegistry.caKey }}
        path: ca.crt
{{- end }}
{{- end }}

{{- define "eos-bridge.registryTlsVolumeMount" -}}
{{- if and .Values.schemaRegistry.url .Values.schemaRegistry.caSecret }}
- name: registry-tls
  mountPath: {{ include "eos-bridge.registryTlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "eos-bridge.tlsVolumeMount" -}}
{{- if and .Values.tls.enabled (or .Values.tls.caSecret .Values.tls.clientSecret) }}
- name: kafka-tls
  mountPath: {{ include "eos-bridge.tlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/*
Ports of bridge.bootstrapServers (host:port,...), or networkPolicy.kafkaPorts when set.
*/}}
{{- define "eos-bridge.kafkaPorts" -}}
{{- $ports := list }}
{{- if .Values.networkPolicy.kafkaPorts }}
{{- $ports = .Values.networkPolicy.kafkaPorts }}
{{- else }}
{{- range splitList "," (trimSuffix "," (printf "%s,%s" .Values.bridge.bootstrapServers .Values.target.bootstrapServers)) }}
{{- $port := last (splitList ":" (trim .)) }}
{{- if regexMatch "^[0-9]+$" $port }}
{{- $ports = append $ports (int $port) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson (uniq $ports) }}
{{- end }}

{{/*
Where the ConfigMap is mounted, and the files in it.
*/}}
{{- define "eos-bridge.configDir" -}}/etc/eos-bridge{{- end }}
{{- define "eos-bridge.stateDir" -}}/var/lib/eos-bridge/state{{- end }}

{{/*
Fail rendering with one clear message when a required setting is missing.
*/}}
{{- define "eos-bridge.validate" -}}
{{- if not .Values.bridge.bootstrapServers }}
{{- fail "bridge.bootstrapServers is required (e.g. --set bridge.bootstrapServers=kafka:9092)" }}
{{- end }}
{{- if not .Values.bridge.inputTopics }}
{{- fail "bridge.inputTopics needs at least one topic (e.g. --set 'bridge.inputTopics={orders}')" }}
{{- end }}
{{- if not .Values.bridge.outputTopic }}
{{- fail "bridge.outputTopic is required (e.g. --set bridge.outputTopic=orders-enriched)" }}
{{- end }}
{{- if and .Values.bridge.pipeline .Values.pipelineSpec }}
{{- fail "set either bridge.pipeline (module:attr) or pipelineSpec, not both" }}
{{- end }}
{{- if and .Values.sasl.enabled (not .Values.sasl.existingSecret) }}
{{- fail "sasl.existingSecret must name a Secret with the SASL credentials when sasl.enabled is true" }}
{{- end }}
{{- if and .Values.target.sasl.enabled (not .Values.target.sasl.existingSecret) }}
{{- fail "target.sasl.existingSecret must name a Secret with the target's SASL credentials when target.sasl.enabled is true" }}
{{- end }}
{{- include "eos-bridge.validateBridge" . }}
{{- include "eos-bridge.validateForced" . }}
{{- include "eos-bridge.validateSecurity" . }}
{{- end }}

{{/*
What the bridge itself would refuse at start (app/config.py), caught before anything is applied.
*/}}
{{- define "eos-bridge.validateBridge" -}}
{{- $b := .Values.bridge }}
{{- if gt (mulf $b.commitInterval 3000.0) (float64 $b.transactionTimeoutMs) }}
{{- fail (printf "bridge.commitInterval (%vs) must be at most a third of bridge.transactionTimeoutMs (%v ms), so a slow checkpoint never outlives its transaction: lower the interval or raise the timeout" $b.commitInterval $b.transactionTimeoutMs) }}
{{- end }}
{{- if and (has $b.outputTopic $b.inputTopics) (not (include "eos-bridge.twoClusters" .)) }}
{{- fail (printf "bridge.outputTopic %q is also in bridge.inputTopics: the bridge would read its own output" $b.outputTopic) }}
{{- end }}
{{- end }}

{{/*
The librdkafka keys the bridge forces (app/kafka/defaults.py FORCED_REASONS, said with the
chart's value names): refused in bridge.kafka, bridge.consumer, bridge.producer and
target.kafka with their reason, as the bridge would refuse them at start.
*/}}
{{- define "eos-bridge.validateForced" -}}
{{- $consumer := dict
  "group.id" "from bridge.groupId"
  "group.instance.id" "from the pod name, with static membership"
  "group.protocol" "from bridge.groupProtocol"
  "enable.auto.commit" "false: positions are committed inside each transaction"
  "enable.auto.offset.store" "false: positions are committed inside each transaction"
  "isolation.level" "read_committed: records of aborted transactions are never read" }}
{{- $producer := dict
  "transactional.id" "from bridge.transactionalIdPrefix and the pod name"
  "transaction.timeout.ms" "from bridge.transactionTimeoutMs"
  "enable.idempotence" "true: transactions need the idempotent producer"
  "acks" "all: transactions need the acknowledgement of every in-sync replica" }}
{{- $both := merge (deepCopy $consumer) $producer }}
{{- range $where := list (list "bridge.kafka" .Values.bridge.kafka $both) (list "bridge.consumer" .Values.bridge.consumer $consumer) (list "bridge.producer" .Values.bridge.producer $producer) (list "target.kafka" .Values.target.kafka $both) }}
{{- $forced := index $where 2 }}
{{- range $key := keys (index $where 1) | sortAlpha }}
{{- if hasKey $forced $key }}
{{- fail (printf "%s.%s is set by the bridge itself (%s): remove it" (index $where 0) $key (index $forced $key)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Credentials only through Secrets; the security settings the chart derives from sasl.* and tls.*
are not also set by hand.
*/}}
{{- define "eos-bridge.validateSecurity" -}}
{{- $secretKeys := list "sasl.username" "sasl.password" "ssl.key.password" "ssl.key.pem" "ssl.keystore.password" "sasl.oauthbearer.client.secret" "sasl.oauthbearer.config" }}
{{- range $map := list "kafka" "consumer" "producer" }}
{{- range $key, $_ := index $.Values.bridge $map }}
{{- if has $key $secretKeys }}
{{- fail (printf "bridge.%s.%s would put a secret into the ConfigMap: use sasl.existingSecret or tls.keyPasswordSecret (or extraEnv with a secretKeyRef)" $map $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key, $_ := $.Values.target.kafka }}
{{- if has $key $secretKeys }}
{{- fail (printf "target.kafka.%s would put a secret into the ConfigMap: use target.sasl.existingSecret or target.tls.keyPasswordSecret" $key) }}
{{- end }}
{{- end }}
{{- $derived := keys (include "eos-bridge.tlsSettings" . | fromYaml) }}
{{- if include "eos-bridge.securityProtocol" . }}
{{- $derived = append $derived "security.protocol" }}
{{- end }}
{{- if .Values.sasl.enabled }}
{{- $derived = append $derived "sasl.mechanisms" }}
{{- end }}
{{- range $key := $derived }}
{{- if hasKey $.Values.bridge.kafka $key }}
{{- fail (printf "bridge.kafka.%s is set by the chart from the sasl and tls values: set it there, not in bridge.kafka" $key) }}
{{- end }}
{{- end }}
{{- if and .Values.tls.enabled (eq (include "eos-bridge.securityProtocol" .) "SASL_PLAINTEXT") }}
{{- fail "tls.enabled needs sasl.securityProtocol SASL_SSL (SASL_PLAINTEXT would not use TLS)" }}
{{- end }}
{{- if and .Values.tls.keyPasswordSecret.name (not .Values.tls.clientSecret) }}
{{- fail "tls.keyPasswordSecret is the password of the client key: set tls.clientSecret too" }}
{{- end }}
{{- end }}

{{/*
Environment of the bridge container, shared with the helm test pod so the test checks exactly
what the bridge runs with.
*/}}
{{- define "eos-bridge.bridgeEnv" -}}
# The pod name (<fullname>-<ordinal>) is stable across restarts: it becomes the
# transactional.id suffix.
- name: BRIDGE_INSTANCE_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: BRIDGE_CONFIG_FILE
  value: {{ include "eos-bridge.configDir" . }}/config.yaml
- name: BRIDGE_BOOTSTRAP_SERVERS
  value: {{ .Values.bridge.bootstrapServers | quote }}
- name: BRIDGE_INPUT_TOPICS
  value: {{ .Values.bridge.inputTopics | toJson | quote }}
- name: BRIDGE_OUTPUT_TOPIC
  value: {{ .Values.bridge.outputTopic | quote }}
{{- with .Values.bridge.dlqTopic }}
- name: BRIDGE_DLQ_TOPIC
  value: {{ . | quote }}
{{- end }}
- name: BRIDGE_GROUP_ID
  value: {{ include "eos-bridge.groupId" . | quote }}
- name: BRIDGE_GROUP_PROTOCOL
  value: {{ .Values.bridge.groupProtocol | quote }}
- name: BRIDGE_LEAVE_GROUP_ON_SHUTDOWN
  value: {{ .Values.bridge.leaveGroupOnShutdown | quote }}
- name: BRIDGE_TRANSACTIONAL_ID_PREFIX
  value: {{ include "eos-bridge.transactionalIdPrefix" . | quote }}
- name: BRIDGE_COMMIT_INTERVAL
  value: {{ .Values.bridge.commitInterval | quote }}
- name: BRIDGE_COMMIT_EVERY
  value: {{ .Values.bridge.commitEvery | int64 | quote }}
- name: BRIDGE_TRANSACTION_TIMEOUT_MS
  value: {{ .Values.bridge.transactionTimeoutMs | int64 | quote }}
- name: BRIDGE_SHUTDOWN_TIMEOUT
  value: {{ .Values.bridge.shutdownTimeout | quote }}
- name: BRIDGE_PROCESSING_GUARANTEE
  value: {{ .Values.bridge.processingGuarantee | quote }}
- name: BRIDGE_STATE_DIR
  value: {{ include "eos-bridge.stateDir" . }}
- name: BRIDGE_HTTP_PORT
  value: {{ .Values.bridge.httpPort | int64 | quote }}
- name: BRIDGE_LOG_FORMAT
  value: {{ .Values.bridge.logFormat | quote }}
- name: BRIDGE_LOG_LEVEL
  value: {{ .Values.bridge.logLevel | quote }}
{{- with .Values.bridge.pipeline }}
- name: BRIDGE_PIPELINE
  value: {{ . | quote }}
{{- end }}
{{- if .Values.pipelineSpec }}
- name: BRIDGE_PIPELINE_SPEC
  value: {{ include "eos-bridge.configDir" . }}/pipeline.yaml
{{- end }}
{{- with include "eos-bridge.credentialEnv" . | trim }}
{{ . }}
{{- end }}
{{- with include "eos-bridge.targetEnv" . | trim }}
{{ . }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Volume mounts of the helm test containers: what the bridge reads, no state.
*/}}
{{- define "eos-bridge.testMounts" -}}
- name: tmp
  mountPath: /tmp
- name: config
  mountPath: {{ include "eos-bridge.configDir" . }}
  readOnly: true
- name: test
  mountPath: /etc/eos-bridge-test
  readOnly: true
{{- with include "eos-bridge.tlsVolumeMount" . | trim }}
{{ . }}
{{- end }}
{{- with include "eos-bridge.targetTlsVolumeMount" . | trim }}
{{ . }}
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
What the driver and the executors of the SparkApplication share: the claim, a scratch emptyDir,
the TLS files (executors open the truststore themselves) and the pod hardening. Only the driver
reads the bridge's settings and credentials: it turns them into the Kafka options it ships to
the executors. Call with (dict "context" $ "driver" true|false).
*/}}
{{- define "eos-bridge.sparkPodSpec" -}}
{{- $ := .context -}}
env:
  - name: HOME
    value: /tmp
  {{- if .driver }}
  - name: BRIDGE_CONFIG_FILE
    value: {{ include "eos-bridge.configDir" $ }}/config.yaml
  {{- with include "eos-bridge.credentialEnv" $ | trim }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- end }}
  {{- with $.Values.sparkApplication.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
volumeMounts:
  - name: data
    mountPath: /var/lib/eos-bridge/spark
  - name: tmp
    mountPath: /tmp
  {{- if .driver }}
  - name: config
    mountPath: {{ include "eos-bridge.configDir" $ }}
    readOnly: true
  {{- end }}
  {{- if .specs }}
  - name: specs
    mountPath: {{ include "eos-bridge.sparkSpecsDir" $ }}
    readOnly: true
  {{- end }}
  {{- with include "eos-bridge.tlsVolumeMount" $ | trim }}
  {{- . | nindent 2 }}
  {{- end }}
podSecurityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
securityContext:
  {{- toYaml $.Values.securityContext | nindent 2 }}
{{- with $.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Spark jobs (spark.jobs). The spec file of one job: its name defaults to the job's name (the
Kafka results sink derives its transactional id from it).
*/}}
{{- define "eos-bridge.sparkSpecsDir" -}}/etc/eos-bridge-spark-specs{{- end }}

{{- define "eos-bridge.sparkJobSpec" -}}
{{- toYaml (merge (deepCopy .spec) (dict "name" .name)) }}
{{- end }}

{{/*
The jobs to render: spark.jobs, or one unnamed job (the `args` of the section) when empty.
Called with (dict "context" $ "section" "spark"|"sparkApplication"); returns YAML: a list of
{suffix, args, schedule}.
*/}}
{{- define "eos-bridge.sparkJobs" -}}
{{- $ := .context -}}
{{- $section := get $.Values .section -}}
{{- $jobs := list -}}
{{- if not $.Values.spark.jobs }}
{{- $args := list }}
{{- range $section.args }}{{- $args = append $args (tpl (toString .) $) }}{{- end }}
{{- $jobs = append $jobs (dict "suffix" "" "args" $args "schedule" $.Values.spark.schedule "name" "") }}
{{- else }}
{{- $trigger := ternary "available-now" "1 minute" (eq .section "spark") }}
{{- $master := ternary "local[2]" "" (eq .section "spark") }}
{{- range $.Values.spark.jobs }}
{{- $dir := printf "/var/lib/eos-bridge/spark/%s" .name }}
{{- $args := list "--trigger" $trigger "--bootstrap" $.Values.bridge.bootstrapServers "--spec" (printf "%s/%s.yaml" (include "eos-bridge.sparkSpecsDir" $) .name) "--checkpoint" (printf "%s/checkpoint" $dir) "--table" (printf "%s/table" $dir) "--master" $master }}
{{- $topics := dig "input" "topics" list .spec }}
{{- if not $topics }}
{{- $args = concat $args (list "--topic" $.Values.bridge.outputTopic) }}
{{- end }}
{{- range .args }}{{- $args = append $args (tpl (toString .) $) }}{{- end }}
{{- $jobs = append $jobs (dict "suffix" (printf "-%s" .name) "args" $args "schedule" (default $.Values.spark.schedule .schedule) "name" .name "specSha" (include "eos-bridge.sparkJobSpec" . | sha256sum)) }}
{{- end }}
{{- end }}
{{- toYaml $jobs }}
{{- end }}
