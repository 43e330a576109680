{{/*
Names and labels shared by the templates.
*/}}

{{/* The app.kubernetes.io/name label. */}}
{{- define "sunset.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object: the release's, with -sunset unless it says sunset. */}}
{{- define "sunset.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels that select Sunset's pods; they never change once installed. */}}
{{- define "sunset.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sunset.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of the pods. */}}
{{- define "sunset.podLabels" -}}
{{ include "sunset.selectorLabels" . }}
app.kubernetes.io/part-of: sunset
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "sunset.labels" -}}
{{ include "sunset.podLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Sunset serves a certificate it makes itself. */}}
{{- define "sunset.selfSigned" -}}
{{- if not .Values.tls.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* The Secret Sunset publishes its CA in. */}}
{{- define "sunset.caSecret" -}}
{{- .Values.tls.caSecret | default (printf "%s-ca" (include "sunset.fullname" .)) -}}
{{- end -}}

{{/* Sunset publishes the CA of the certificate it makes. */}}
{{- define "sunset.publishesCA" -}}
{{- if and (include "sunset.selfSigned" .) .Values.tls.publishCA -}}true{{- end -}}
{{- end -}}

{{/* The Service's name in cluster DNS, which the aggregator and Prometheus verify. */}}
{{- define "sunset.serviceHost" -}}
{{- printf "%s.%s.svc" (include "sunset.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* The ports of config.kafka.brokers, sorted and each once. */}}
{{- define "sunset.brokerPorts" -}}
{{- $ports := list -}}
{{- with .Values.config.kafka -}}
{{- range .brokers -}}
{{- $port := regexFind "[0-9]+$" (toString .) -}}
{{- if not $port -}}
{{- fail (printf "config.kafka.brokers: %q is not host:port" .) -}}
{{- end -}}
{{- $ports = append $ports (printf "%05d" (atoi $port)) -}}
{{- end -}}
{{- end -}}
{{- range $ports | uniq | sortAlpha }}
- {{ atoi . }}
{{- end -}}
{{- end -}}
