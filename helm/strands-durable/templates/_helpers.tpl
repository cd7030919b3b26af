{{/* Names ------------------------------------------------------------------------- */}}
{{- define "sd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sd.fullname" -}}
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

{{/* "<fullname>-<component>", kept within 63 characters */}}
{{- define "sd.component" -}}
{{- printf "%s-%s" (include "sd.fullname" .root | trunc (int (sub 62 (len .component))) | trimSuffix "-") .component -}}
{{- end -}}

{{- define "sd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of one role: (dict "root" $ "component" "worker") */}}
{{- define "sd.componentLabels" -}}
{{ include "sd.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sd.componentSelector" -}}
{{ include "sd.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Redis ------------------------------------------------------------------------- */}}
{{- define "sd.redisSecretName" -}}
{{- default (include "sd.fullname" .) .Values.redis.existingSecret -}}
{{- end -}}

{{- define "sd.redisUrlKey" -}}
{{- if .Values.redis.existingSecret -}}{{ .Values.redis.existingSecretUrlKey }}{{- else -}}redis-url{{- end -}}
{{- end -}}

{{/* The Secret key of the Redis password, or "" when Redis needs none */}}
{{- define "sd.redisPasswordKey" -}}
{{- if .Values.redis.existingSecret -}}{{ .Values.redis.existingSecretPasswordKey }}{{- else if .Values.redis.password -}}redis-password{{- end -}}
{{- end -}}

{{/* DURABLE_REDIS_URL built from values (store/redis_url.py reads the sentinel and
cluster forms; a cluster has db 0 only, so its URL names none) */}}
{{- define "sd.redisUrl" -}}
{{- $r := .Values.redis -}}
{{- $auth := "" -}}
{{- if $r.password -}}
{{- $auth = printf "%s:%s@" (urlquery $r.username) (urlquery $r.password) -}}
{{- else if $r.username -}}
{{- $auth = printf "%s@" (urlquery $r.username) -}}
{{- end -}}
{{- if eq $r.mode "sentinel" -}}
{{- printf "%s://%s%s/%s/%d" (ternary "rediss+sentinel" "redis+sentinel" $r.tls) $auth (join "," $r.sentinel.hosts) (urlquery $r.sentinel.masterName) (int $r.db) -}}
{{- else if eq $r.mode "cluster" -}}
{{- printf "%s://%s%s/" (ternary "rediss+cluster" "redis+cluster" $r.tls) $auth (join "," $r.cluster.nodes) -}}
{{- else -}}
{{- printf "%s://%s%s:%d/%d" (ternary "rediss" "redis" $r.tls) $auth $r.host (int $r.port) (int $r.db) -}}
{{- end -}}
{{- end -}}

{{/* Settings ---------------------------------------------------------------------- */}}
{{- define "sd.leaseRenewMs" -}}
{{- $s := .Values.settings -}}
{{- if $s.leaseRenewMs -}}{{ int $s.leaseRenewMs }}{{- else -}}{{ max 50 (div (int $s.claimIdleMs) 3) }}{{- end -}}
{{- end -}}

{{/* Seconds a worker may need after SIGTERM: the shutdown grace plus one lease renewal */}}
{{- define "sd.workerDrainSeconds" -}}
{{- add (ceil .Values.settings.shutdownGraceS | int) (div (add (int (include "sd.leaseRenewMs" .)) 999) 1000) -}}
{{- end -}}

{{- define "sd.workerTerminationGrace" -}}
{{- $need := int (include "sd.workerDrainSeconds" .) -}}
{{- $set := .Values.worker.terminationGracePeriodSeconds -}}
{{- if kindIs "invalid" $set -}}
{{- add $need 15 -}}
{{- else if le (int $set) $need -}}
{{- fail (printf "worker.terminationGracePeriodSeconds=%d must exceed settings.shutdownGraceS + leaseRenewMs/1000 = %d s, or running steps are killed before they commit" (int $set) $need) -}}
{{- else -}}
{{- int $set -}}
{{- end -}}
{{- end -}}

{{/* The step stream of each shard: must match store/keys.py Keys.stream() */}}
{{- define "sd.streams" -}}
{{- $prefix := .Values.settings.keyPrefix -}}
{{- range $k := until (int .Values.settings.shards) }}
- {{ printf "%s:{s%d}:steps" $prefix $k | quote }}
{{- end -}}
{{- end -}}

{{/* Each shard's count of steps deferred off its stream by fair dispatch between
namespaces (one item a step): must match store/keys.py Keys.fair_waiting() */}}
{{- define "sd.waitingLists" -}}
{{- $prefix := .Values.settings.keyPrefix -}}
{{- range $k := until (int .Values.settings.shards) }}
- {{ printf "%s:{s%d}:fair:waiting" $prefix $k | quote }}
{{- end -}}
{{- end -}}

{{/* Pod pieces shared by the roles -------------------------------------------------- */}}
{{- define "sd.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sd.env" -}}
- name: DURABLE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sd.redisSecretName" . }}
      key: {{ include "sd.redisUrlKey" . }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sd.envFrom" -}}
- configMapRef:
    name: {{ include "sd.fullname" . }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sd.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: /home/durable
{{- end -}}

{{- define "sd.volumes" -}}
- name: tmp
  emptyDir: {}
- name: home
  emptyDir: {}
{{- end -}}

{{/* The Secret key of the API token as "name: ...\nkey: ...", or "" when there is none */}}
{{- define "sd.apiTokenRef" -}}
{{- if .Values.api.existingSecret -}}
name: {{ .Values.api.existingSecret }}
key: {{ .Values.api.existingSecretKey }}
{{- else if .Values.api.token -}}
name: {{ include "sd.fullname" . }}
key: api-token
{{- end -}}
{{- end -}}

{{/* DURABLE_API_TOKEN from a Secret, when a token is configured */}}
{{- define "sd.apiTokenEnv" -}}
{{- with include "sd.apiTokenRef" . }}
- name: DURABLE_API_TOKEN
  valueFrom:
    secretKeyRef:
      {{- . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* "shard0 + deferred0 + shard1 + ..." over the triggers' names */}}
{{- define "sd.shardFormula" -}}
{{- $names := list -}}
{{- range $k := until . -}}
{{- $names = append $names (printf "shard%d" $k) -}}
{{- $names = append $names (printf "deferred%d" $k) -}}
{{- end -}}
{{- join " + " $names -}}
{{- end -}}
