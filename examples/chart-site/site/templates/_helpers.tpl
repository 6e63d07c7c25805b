{{/* The image reference the web service runs. */}}
{{- define "site.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
