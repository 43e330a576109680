{{- define "shop.name" -}}{{ .Release.Name }}-shop{{- end }}
