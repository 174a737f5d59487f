{{- define "inorder.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "inorder.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The port clients connect to in the sni and single topologies: the
Service's one port, written into every broker address. */}}
{{- define "inorder.clientPort" -}}
{{- if eq .Values.topology "single" -}}
{{- .Values.single.advertisedPort | default .Values.listenPort -}}
{{- else -}}
{{- .Values.sni.advertisedPort | default .Values.listenPort -}}
{{- end -}}
{{- end -}}

{{/* The host a gateway's clients resolve to the Service. */}}
{{- define "inorder.advertisedHost" -}}
{{- .Values.advertisedHost | default (printf "%s.%s.svc.cluster.local" (include "inorder.fullname" .) .Release.Namespace) -}}
{{- end -}}

{{- define "inorder.labels" -}}
{{ include "inorder.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
