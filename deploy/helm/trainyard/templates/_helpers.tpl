{{/*
The chart name, or nameOverride.
*/}}
{{- define "trainyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's objects: fullnameOverride; else the release name
when it already contains the chart name; else "<release>-<chart>".
*/}}
{{- define "trainyard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "trainyard.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"<chart>-<version>" for the helm.sh/chart label.
*/}}
{{- define "trainyard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels that select the scheduler's pods (stable across upgrades).
*/}}
{{- define "trainyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trainyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{/*
The labels of every object of the release.
*/}}
{{- define "trainyard.labels" -}}
helm.sh/chart: {{ include "trainyard.chart" . }}
{{ include "trainyard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trainyard
{{- end }}

{{/*
The ServiceAccount the scheduler runs as.
*/}}
{{- define "trainyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "trainyard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image reference: repository@digest when a digest is set, else
repository:tag (the tag defaults to the chart's appVersion).
*/}}
{{- define "trainyard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The settings file (`trainyard serve --config`): the user's scheduler and
service sections, with the service's HTTP address and leader election taken
from the chart's values (the probes, the Service and the lease Role follow
the same values).
*/}}
{{- define "trainyard.config" -}}
{{- $service := deepCopy (default dict .Values.config.service) }}
{{- $_ := set $service "httpAddress" (printf "0.0.0.0:%d" (int .Values.httpPort)) }}
{{- $election := dict "enabled" .Values.leaderElection.enabled "leaseName" .Values.leaderElection.leaseName "leaseNamespace" .Release.Namespace "leaseDurationSeconds" (int .Values.leaderElection.leaseDurationSeconds) "renewDeadlineSeconds" (int .Values.leaderElection.renewDeadlineSeconds) "retryPeriodSeconds" (int .Values.leaderElection.retryPeriodSeconds) }}
{{- $_ := set $service "leaderElection" $election }}
{{- $store := dict "checkpointSeconds" (int .Values.store.checkpointSeconds) "checkpointName" .Values.store.checkpointName }}
{{- if .Values.store.enabled }}
{{- $_ := set $store "path" (printf "/var/lib/trainyard/state.%s" .Values.store.backend) }}
{{- $_ := set $store "backend" .Values.store.backend }}
{{- if .Values.store.retentionDays }}
{{- $_ := set $store "retentionDays" (int .Values.store.retentionDays) }}
{{- end }}
{{- if .Values.store.jobRetentionDays }}
{{- $_ := set $store "jobRetentionDays" (int .Values.store.jobRetentionDays) }}
{{- end }}
{{- end }}
{{- $_ := set $service "store" $store }}
{{- $config := dict "scheduler" (default dict .Values.config.scheduler) "service" $service }}
{{- toYaml $config }}
{{- end }}

{{/*
Checks across values that the schema cannot express.
*/}}
{{- define "trainyard.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas is %d but leaderElection.enabled is false: replicas without leader election would all bind and evict; set replicas: 1 or enable leader election" (int .Values.replicas)) }}
{{- end }}
{{- $le := .Values.leaderElection }}
{{- if not (lt (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds)) }}
{{- fail (printf "leaderElection.renewDeadlineSeconds (%d) must be less than leaderElection.leaseDurationSeconds (%d): the leader must give up before another replica may take the lease" (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds)) }}
{{- end }}
{{- if not (lt (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds)) }}
{{- fail (printf "leaderElection.retryPeriodSeconds (%d) must be less than leaderElection.renewDeadlineSeconds (%d)" (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds)) }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and $pdb.enabled (gt (int .Values.replicas) 1) (ge (int $pdb.minAvailable) (int .Values.replicas)) }}
{{- fail (printf "podDisruptionBudget.minAvailable (%d) must be less than replicas (%d), or no node holding a replica could ever be drained" (int $pdb.minAvailable) (int .Values.replicas)) }}
{{- end }}
{{- end }}
