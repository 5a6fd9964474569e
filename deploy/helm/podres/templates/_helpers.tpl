{{/* The image of podresd, podres-syncer and podres-extender. */}}
{{- define "podres.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Labels of every object: deploy/'s app.kubernetes.io/name, and Helm's. */}}
{{- define "podres.labels" -}}
app.kubernetes.io/name: podres
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The syncer's ServiceAccount as the API server names its user. */}}
{{- define "podres.syncerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:podres-syncer
{{- end }}

{{/* With metrics.enabled, the pod IP for --metrics-listen (the downward API). */}}
{{- define "podres.podIPEnv" -}}
{{- if .Values.metrics.enabled }}
        - name: POD_IP
          valueFrom:
            fieldRef:
              apiVersion: v1
              fieldPath: status.podIP
{{- end }}
{{- end }}
