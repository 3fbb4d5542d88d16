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

{{- define "eos-bridge.groupId" -}}
{{- default (include "eos-bridge.fullname" .) .Values.bridge.groupId }}
{{- end }}

{{- define "eos-bridge.transactionalIdPrefix" -}}
{{- default (include "eos-bridge.fullname" .) .Values.bridge.transactionalIdPrefix }}
{{- end }}

{{/*
Contents of the bridge's config file (BRIDGE_CONFIG_FILE): the librdkafka maps that have no
environment-variable form. SASL mechanism and protocol join the common map; the credentials
themselves come from the Secret as environment variables, never from here.
*/}}
{{- define "eos-bridge.configFile" -}}
{{- $kafka := deepCopy .Values.bridge.kafka }}
{{- if .Values.sasl.enabled }}
{{- $_ := set $kafka "security.protocol" .Values.sasl.securityProtocol }}
{{- $_ := set $kafka "sasl.mechanisms" .Values.sasl.mechanism }}
{{- end }}
{{- dict "kafka" $kafka "consumer" .Values.bridge.consumer "producer" .Values.bridge.producer | toYaml }}
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
{{- end }}
