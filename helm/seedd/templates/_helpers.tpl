{{/* Names */}}
{{- define "seedd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Base name of every resource; also the StatefulSet name, so pods are <fullname>-<i>. Kept
to 40 characters: pod names add "-<ordinal>", the headless Service "-headless" and the p2p
Services "-p2p-<ordinal>" or "-p2p-<identity>-<ordinal>" (identity names have at most 11
characters), and a pod's hostname plus its controller-revision-hash label must stay within 63. */}}
{{- define "seedd.rootFullname" -}}
{{- $max := 40 }}
{{- if and .Values.fleet (gt (int .Values.fleet.shards) 0) }}{{ $max = 36 }}{{ end }}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc $max | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc $max | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc $max | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* In a fleet (fleet.shards > 0) every per-shard resource is named <root>-s<k>: the root is
kept to 36 characters so that "-s<k>" (k < 100) keeps the 40 above. */}}
{{- define "seedd.fullname" -}}
{{- if .Values.fleetShard }}
{{- printf "%s-%s" (include "seedd.rootFullname" .) .Values.fleetShard }}
{{- else }}
{{- include "seedd.rootFullname" . }}
{{- end }}
{{- end }}

{{/* The per-shard contexts of a fleet (a root-like dict whose .Values has fleetShard "s<k>" and
fleet.shardValues[k] merged in), or the root itself without a fleet. Args: (dict "root" $
"out" $holder); the list is put in $holder.contexts. */}}
{{- define "seedd.shardContexts" -}}
{{- $root := .root }}
{{- $contexts := list }}
{{- $n := int $root.Values.fleet.shards }}
{{- if eq $n 0 }}
{{- $contexts = list $root }}
{{- else }}
{{- range $k := until $n }}
{{- $v := deepCopy $root.Values }}
{{- $sv := $root.Values.fleet.shardValues }}
{{- if lt $k (len $sv) }}
{{- include "seedd.merge" (dict "dst" $v "src" (default (dict) (index $sv $k))) }}
{{- end }}
{{- $_ := set $v "fleetShard" (printf "s%d" $k) }}
{{- $contexts = append $contexts (dict "Values" $v "Release" $root.Release "Chart" $root.Chart "Template" $root.Template "Capabilities" $root.Capabilities "Files" $root.Files) }}
{{- end }}
{{- end }}
{{- $_ := set .out "contexts" $contexts }}
{{- end }}

{{/* The placement file (docs/scaling.md) of a fleet: every shard's replicas by their pod DNS
names, and fleet.placement's explicit entries. */}}
{{- define "seedd.placementToml" -}}
{{- $v := .Values }}
{{- $root := include "seedd.rootFullname" . }}
{{- $n := int $v.replicaCount }}
# Placement of the fleet {{ $root }}, rendered by the Helm chart; `seedctl fleet move` edits a
# copy of it (publish it as this ConfigMap). Repositories without an entry are placed by hash.
{{- range $k := until (int $v.fleet.shards) }}
{{- $shard := printf "%s-s%d" $root $k }}
{{- $sn := $n }}
{{- $sv := $v.fleet.shardValues }}
{{- if and (lt $k (len $sv)) (index $sv $k) (hasKey (index $sv $k) "replicaCount") }}{{ $sn = int (index $sv $k).replicaCount }}{{ end }}
{{- $http := list }}
{{- $admin := list }}
{{- range $i := until $sn }}
{{- $host := printf "%s-%d.%s-headless.%s.svc.%s" $shard $i $shard $.Release.Namespace $v.clusterDomain }}
{{- $http = append $http (printf "http://%s:%d" $host (int $v.http.port)) }}
{{- $admin = append $admin (printf "http://%s:%d" $host (int $v.admin.port)) }}
{{- end }}

[[shards]]
name = "s{{ $k }}"
replicas = {{ toJson $http }}
admin = {{ toJson $admin }}
{{- end }}
{{- range $table := list "repos" "hosts" "moving" }}
{{- with get $v.fleet.placement $table }}

[{{ $table }}]
{{- range $key, $shard := . }}
{{ toJson $key }} = {{ toJson $shard }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "seedd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "seedd.headless" -}}
{{- printf "%s-headless" (include "seedd.fullname" .) }}
{{- end }}

{{- define "seedd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "seedd.rootFullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "seedd.adminTokenSecret" -}}
{{- if .Values.admin.token.existingSecret }}
{{- .Values.admin.token.existingSecret }}
{{- else if .Values.admin.token.create }}
{{- printf "%s-admin-token" (include "seedd.rootFullname" .) }}
{{- end }}
{{- end }}

{{/* Labels */}}
{{- define "seedd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "seedd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Values.fleetShard }}
seedd.io/shard: {{ . }}
{{- end }}
{{- end }}

{{- define "seedd.frontSelectorLabels" -}}
app.kubernetes.io/name: {{ include "seedd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: front
{{- end }}

{{- define "seedd.labels" -}}
helm.sh/chart: {{ include "seedd.chart" . }}
{{ include "seedd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: seedd
{{- end }}

{{- define "seedd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Fail early on combinations that cannot work. */}}
{{- define "seedd.validate" -}}
{{- $n := int .Values.replicaCount }}
{{- if gt (len .Values.replicas) $n }}
{{- fail (printf "replicas has %d entries but replicaCount is %d: entry i configures ordinal i" (len .Values.replicas) $n) }}
{{- end }}
{{- if and (gt $n 1) .Values.keys.existingSecret }}
{{- fail "keys.existingSecret is the key of a single replica: with replicaCount > 1 give each replica its own key in replicas[i].existingSecret" }}
{{- end }}
{{- if and (gt $n 1) .Values.p2p.externalAddresses }}
{{- fail "p2p.externalAddresses would announce the same address for every replica: use replicas[i].externalAddresses or p2p.externalAddressTemplate" }}
{{- end }}
{{- if and (gt $n 1) .Values.persistence.existingClaim }}
{{- fail "persistence.existingClaim holds one replica's data: use it with replicaCount 1 only" }}
{{- end }}
{{- if and (gt (int .Values.fleet.shards) 0) .Values.http.tls.enabled }}
{{- fail "http.tls.enabled with fleet.shards: the front speaks HTTP; terminate TLS at the Ingress (ingress.tls)" }}
{{- end }}
{{- if and (gt (int .Values.fleet.shards) 0) .Values.persistence.existingClaim }}
{{- fail "persistence.existingClaim holds one replica's data: a fleet gives every replica of every shard its own PVC" }}
{{- end }}
{{- if and .Values.http.tls.enabled (not .Values.http.tls.existingSecret) }}
{{- fail "http.tls.enabled needs http.tls.existingSecret (a Secret with the certificate and key)" }}
{{- end }}
{{- $nids := dict }}
{{- range $i, $r := .Values.replicas }}
{{- if and $r $r.nid }}
{{- if hasKey $nids $r.nid }}
{{- fail (printf "replicas[%d].nid %s is also the nid of replicas[%s]: every replica needs its own key" $i $r.nid (get $nids $r.nid)) }}
{{- end }}
{{- $_ := set $nids $r.nid (toString $i) }}
{{- end }}
{{- end }}
{{- /* In-process identities: names and ports unique in the pod. */}}
{{- $ports := dict (toString (int .Values.p2p.port)) "p2p.port" (toString (int .Values.http.port)) "http.port" (toString (int .Values.admin.port)) "admin.port" }}
{{- $names := dict }}
{{- range $k, $id := .Values.identities }}
{{- if eq $id.name "default" }}
{{- fail (printf "identities[%d].name \"default\" is the node key's identity (the main p2p listener): pick another name" $k) }}
{{- end }}
{{- if contains "--" $id.name }}
{{- fail (printf "identities[%d].name %s: no \"--\" (its container port is named p2p-<name>, an IANA service name)" $k $id.name) }}
{{- end }}
{{- if hasKey $names $id.name }}
{{- fail (printf "identities[%d].name %s is also the name of identities[%s]" $k $id.name (get $names $id.name)) }}
{{- end }}
{{- $_ := set $names $id.name (toString $k) }}
{{- $p := toString (int $id.port) }}
{{- if hasKey $ports $p }}
{{- fail (printf "identities[%d].port %s is already used by %s: every identity needs its own port (Noise XK cannot share an IP:port)" $k $p (get $ports $p)) }}
{{- end }}
{{- $_ := set $ports $p (printf "identities[%d] (%s)" $k $id.name) }}
{{- if and (gt $n 1) $id.externalAddresses }}
{{- fail (printf "identities[%d].externalAddresses would announce the same address for every replica: use its externalAddressTemplate or replicas[i].identities.%s.externalAddresses" $k $id.name) }}
{{- end }}
{{- end }}
{{- range $i, $r := .Values.replicas }}
{{- if and $r $r.identities }}
{{- range $name, $_ := $r.identities }}
{{- if not (hasKey $names $name) }}
{{- fail (printf "replicas[%d].identities.%s: no identity %s in identities" $i $name $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Per-replica settings of identity $name on replica $i (replicas[i].identities.<name>), as
JSON. Args: (list $ $i $name) */}}
{{- define "seedd.replicaIdentity" -}}
{{- $root := index . 0 }}{{- $i := index . 1 }}{{- $name := index . 2 }}
{{- $r := dict }}
{{- if lt $i (len $root.Values.replicas) }}{{- $r = default (dict) (index $root.Values.replicas $i) }}{{- end }}
{{- toJson (default (dict) (get (default (dict) $r.identities) $name)) }}
{{- end }}

{{/* Key Secret of replica $i ("" = generated into the volume). Args: (list $ $i) */}}
{{- define "seedd.keySecret" -}}
{{- $root := index . 0 }}{{- $i := index . 1 }}
{{- $r := dict }}
{{- if lt $i (len $root.Values.replicas) }}{{- $r = default (dict) (index $root.Values.replicas $i) }}{{- end }}
{{- if $r.existingSecret }}
{{- $r.existingSecret }}
{{- else if and (eq $i 0) $root.Values.keys.existingSecret }}
{{- $root.Values.keys.existingSecret }}
{{- end }}
{{- end }}

{{/* The seedd config of replica $i as a dict (before rendering to TOML). Args: (list $ $i) */}}
{{- define "seedd.configDict" -}}
{{- $root := index . 0 }}{{- $i := index . 1 }}
{{- $v := $root.Values }}
{{- $n := int $v.replicaCount }}
{{- $fullname := include "seedd.fullname" $root }}
{{- $r := dict }}
{{- if lt $i (len $v.replicas) }}{{- $r = default (dict) (index $v.replicas $i) }}{{- end }}
{{- /* alias */}}
{{- $alias := $r.alias }}
{{- if not $alias }}
{{- $alias = default $fullname $v.alias }}
{{- if gt $n 1 }}
{{- $suffix := printf "-%d" $i }}
{{- $alias = printf "%s%s" ($alias | trunc (int (sub 32 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}
{{- end }}
{{- $alias = $alias | trunc 32 }}
{{- /* external addresses */}}
{{- $ext := list }}
{{- if $r.externalAddresses }}
{{- $ext = $r.externalAddresses }}
{{- else if $v.p2p.externalAddressTemplate }}
{{- $ext = list (replace "{ordinal}" (toString $i) $v.p2p.externalAddressTemplate) }}
{{- else if $v.p2p.externalAddresses }}
{{- $ext = $v.p2p.externalAddresses }}
{{- end }}
{{- /* persistent peers: configured ones, this replica's, the other replicas with a known nid */}}
{{- $connect := list }}
{{- range (concat (default (list) $v.p2p.connect) (default (list) $r.connect)) }}{{ $connect = append $connect . }}{{ end }}
{{- if $v.p2p.peerReplicas }}
{{- range $j, $o := $v.replicas }}
{{- if and (ne $j $i) $o $o.nid (lt $j $n) }}
{{- $connect = append $connect (printf "%s@%s-%d.%s.%s.svc.%s:%d" $o.nid $fullname $j (include "seedd.headless" $root) $root.Release.Namespace $v.clusterDomain (int $v.p2p.port)) }}
{{- end }}
{{- end }}
{{- end }}
{{- $cfg := dict
  "data_dir" $v.dataDir
  "alias" $alias
  "p2p" (dict
    "listen" (list (printf "0.0.0.0:%d" (int $v.p2p.port)))
    "external_addresses" $ext
    "connect" $connect
    "relay" $v.p2p.relay
    "bootstrap" $v.p2p.bootstrap)
  "http" (dict "listen" (printf "0.0.0.0:%d" (int $v.http.port)))
  "admin" (dict "listen" (printf "0.0.0.0:%d" (int $v.admin.port)))
  "policy" (dict "default" $v.policy.default "scope" $v.policy.scope)
  "log" (dict "format" $v.log.format "level" $v.log.level) }}
{{- /* in-process identities ([[identities]]): each its own key, port and addresses */}}
{{- $ids := list }}
{{- range $id := $v.identities }}
{{- $ri := include "seedd.replicaIdentity" (list $root $i $id.name) | fromJson }}
{{- $e := dict "name" $id.name "listen" (list (printf "0.0.0.0:%d" (int $id.port))) }}
{{- if $ri.externalAddresses }}
{{- $_ := set $e "external_addresses" $ri.externalAddresses }}
{{- else if $id.externalAddressTemplate }}
{{- $_ := set $e "external_addresses" (list (replace "{ordinal}" (toString $i) $id.externalAddressTemplate)) }}
{{- else if $id.externalAddresses }}
{{- $_ := set $e "external_addresses" $id.externalAddresses }}
{{- end }}
{{- if $id.inventoryCap }}
{{- $_ := set $e "inventory_cap" (int $id.inventoryCap) }}
{{- end }}
{{- $ids = append $ids $e }}
{{- end }}
{{- if $ids }}
{{- $_ := set $cfg "identities" $ids }}
{{- end }}
{{- if $v.http.tls.enabled }}
{{- $_ := set $cfg.http "tls" (dict "cert" (printf "/etc/seedd/tls/%s" $v.http.tls.certKey) "key" (printf "/etc/seedd/tls/%s" $v.http.tls.keyKey)) }}
{{- end }}
{{- if include "seedd.adminTokenSecret" $root }}
{{- $_ := set $cfg.admin "token_file" (printf "/etc/seedd/admin/%s" $v.admin.token.key) }}
{{- end }}
{{- if include "seedd.keySecret" (list $root $i) }}
{{- $keys := dict "secret" (printf "/etc/seedd/keys/%d/radicle" $i) }}
{{- if $v.keys.passphraseKey }}
{{- $_ := set $keys "passphrase_file" (printf "/etc/seedd/keys/%d/passphrase" $i) }}
{{- end }}
{{- $_ := set $cfg "keys" $keys }}
{{- end }}
{{- if $v.fleetShard }}
{{- $_ := set $cfg "fleet" (dict "shard" $v.fleetShard "placement" "/etc/seedd/placement/placement.toml") }}
{{- /* Clients reach the shard through the front: believe its X-Forwarded-For (the
NetworkPolicy admits HTTP only from the front's pods). */}}
{{- $_ := set $cfg.http "rate" (dict "trusted_proxies" $v.fleet.trustedProxies) }}
{{- end }}
{{- include "seedd.merge" (dict "dst" $cfg "src" (default (dict) $v.config)) }}
{{- include "seedd.merge" (dict "dst" $cfg "src" (default (dict) $r.config)) }}
{{- toJson $cfg }}
{{- end }}

{{/* Deep merge: maps merge key by key, anything else (lists, scalars, null) replaces. Mutates
.dst; copies from .src so values are never aliased. */}}
{{- define "seedd.merge" -}}
{{- $dst := .dst }}
{{- range $k, $v := .src }}
{{- $cur := get $dst $k }}
{{- if and (kindIs "map" $v) (kindIs "map" $cur) }}
{{- include "seedd.merge" (dict "dst" $cur "src" $v) }}
{{- else if kindIs "invalid" $v }}
{{- $_ := set $dst $k nil }}
{{- else }}
{{- $_ := set $dst $k (deepCopy $v) }}
{{- end }}
{{- end }}
{{- end }}

{{/* TOML rendering of a dict: scalars and arrays first, then sub-tables and arrays of tables.
Keys come out sorted, so the output (and the checksum) is stable. null values are left out. */}}
{{- define "seedd.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "seedd.toml.isTableArray" -}}
{{- if and (kindIs "slice" .) (gt (len .) 0) }}
{{- $all := true }}
{{- range . }}{{ if not (kindIs "map" .) }}{{ $all = false }}{{ end }}{{ end }}
{{- if $all }}true{{ end }}
{{- end }}
{{- end }}

{{- define "seedd.toml.value" -}}
{{- if kindIs "string" . }}{{ toJson . }}
{{- else if kindIs "bool" . }}{{ . }}
{{- else if kindIs "float64" . }}
{{- if eq (floor .) . }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if kindIs "slice" . }}[{{ range $i, $e := . }}{{ if $i }}, {{ end }}{{ include "seedd.toml.value" $e }}{{ end }}]
{{- else if kindIs "map" . }}{ {{- $first := true }}{{ range $k, $e := . }}{{ if not (kindIs "invalid" $e) }}{{ if not $first }}, {{ else }} {{ end }}{{ $first = false }}{{ include "seedd.toml.key" $k }} = {{ include "seedd.toml.value" $e }}{{ end }}{{ end }} }
{{- else }}{{ . }}
{{- end }}
{{- end }}

{{- define "seedd.toml.table" -}}
{{- $prefix := .prefix }}
{{- range $k, $v := .table }}
{{- if and (kindIs "slice" $v) (gt (len $v) 1) (not (include "seedd.toml.isTableArray" $v)) }}
{{ include "seedd.toml.key" $k }} = [
{{- range $e := $v }}
  {{ include "seedd.toml.value" $e }},
{{- end }}
]
{{- else if not (or (kindIs "invalid" $v) (kindIs "map" $v) (include "seedd.toml.isTableArray" $v)) }}
{{ include "seedd.toml.key" $k }} = {{ include "seedd.toml.value" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := .table }}
{{- $name := printf "%s%s" $prefix (include "seedd.toml.key" $k) }}
{{- if kindIs "map" $v }}
{{- /* A header only when the table has own keys (or none at all): [a.b] alone implies [a]. */}}
{{- $own := eq (len $v) 0 }}
{{- range $vv := values $v }}{{ if not (or (kindIs "map" $vv) (include "seedd.toml.isTableArray" $vv)) }}{{ $own = true }}{{ end }}{{ end }}
{{- if $own }}

[{{ $name }}]
{{- end }}
{{- include "seedd.toml.table" (dict "prefix" (printf "%s." $name) "table" $v) }}
{{- else if include "seedd.toml.isTableArray" $v }}
{{- range $e := $v }}

[[{{ $name }}]]
{{- include "seedd.toml.table" (dict "prefix" (printf "%s." $name) "table" $e) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The config file of replica $i. Args: (list $ $i) */}}
{{- define "seedd.configToml" -}}
{{- $root := index . 0 }}
# seedd config of {{ include "seedd.fullname" $root }}-{{ index . 1 }}, rendered by the Helm chart (README.md "Configuration").
# SEEDD_<SECTION>__<KEY> environment variables override it.
{{- include "seedd.toml.table" (dict "prefix" "" "table" (include "seedd.configDict" . | fromJson)) }}
{{- with $root.Values.extraConfig }}

# extraConfig
{{ . | trim }}
{{- end }}
{{- end }}
