{{- define "sup.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sup.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sup.labels" -}}
{{ include "sup.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "sup.serviceAccountName" -}}
{{- default (include "sup.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "sup.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where the Kubernetes target keeps the per-user objects: never the release's namespace (SUP's
Secrets live there, and SUP may create pods where it provisions) unless explicitly allowed. */}}
{{- define "sup.targetNamespace" -}}
{{- $namespace := .Values.kube.namespace | default (printf "%s-users" (include "sup.fullname" .) | trunc 63 | trimSuffix "-") -}}
{{- if and (eq $namespace .Release.Namespace) (not .Values.kube.allowReleaseNamespace) -}}
{{- fail (printf "kube.namespace %q is the release's own namespace, which holds SUP's Secrets: SUP may create StatefulSets where it provisions, and such a pod could mount them. Use a namespace of its own (the default is %s-users), or set kube.allowReleaseNamespace=true to accept that risk" $namespace (include "sup.fullname" .)) -}}
{{- end -}}
{{- $namespace -}}
{{- end -}}

{{/* On upgrade, refuse to move the target to another namespace (the default changed in chart
0.2.0 from the release's namespace to <fullname>-users): SUP would leave the old login pods running
unmanaged and start empty homes. The live ConfigMap says where SUP provisions today; `lookup` finds
nothing under `helm template`, so only a real install or upgrade (or --dry-run=server) checks. */}}
{{- define "sup.checkNamespaceMove" -}}
{{- if .Values.kube.enabled -}}
{{- $live := lookup "v1" "ConfigMap" .Release.Namespace (include "sup.fullname" .) -}}
{{- $before := dig "kube" "namespace" "" (fromYaml (dig "data" "sup.yaml" "" $live)) -}}
{{- $after := include "sup.targetNamespace" . -}}
{{- if and $before (ne $before $after) (not .Values.kube.allowNamespaceMove) -}}
{{- fail (printf "SUP provisions into namespace %q today and this upgrade would move it to %q: the login pods there would keep running unmanaged and users would get empty homes. Set kube.namespace=%s to stay (and kube.allowReleaseNamespace=true if that is the release's namespace; see SECURITY.md), or move the homes first and set kube.allowNamespaceMove=true" $before $after $before) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Pod Security level enforced on the target namespace: group login pods need baseline. */}}
{{- define "sup.podSecurity" -}}
{{- if .Values.kube.podSecurity -}}
{{- if not (has .Values.kube.podSecurity (list "restricted" "baseline")) -}}
{{- fail (printf "kube.podSecurity %q: use restricted or baseline (login pods need no more, and SUP may create pods there)" .Values.kube.podSecurity) -}}
{{- end -}}
{{- .Values.kube.podSecurity -}}
{{- else if and (include "sup.homesEnabled" .) (eq .Values.homes.quota "xfs") -}}
privileged
{{- else if or (default dict .Values.kube.settings).group_pods (include "sup.homesEnabled" .) -}}
baseline
{{- else -}}
restricted
{{- end -}}
{{- end -}}

{{/* SUP_CONFIG: the chart's `config`, plus the `kube` section when the target is enabled. */}}
{{- define "sup.config" -}}
{{- $config := deepCopy (default dict .Values.config) -}}
{{- if .Values.kube.enabled -}}
{{- $kube := merge (dict "namespace" (include "sup.targetNamespace" .)) (deepCopy (default dict .Values.kube.settings)) -}}
{{- $_ := set $config "kube" $kube -}}
{{- end -}}
{{- if .Values.gateway.enabled -}}
{{- $_ := set $config "gateway" (include "sup.gatewaySettings" . | fromYaml) -}}
{{- end -}}
{{- if .Values.slurm.enabled -}}
{{- $_ := set $config "slurm" (include "sup.slurmSettings" . | fromYaml) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* With slurm.enabled: the `slurm` settings section as the chart runs it (config.slurm, with
lock_dir set to the emptyDir the chart mounts there), after refusing values that cannot work. */}}
{{- define "sup.slurmSettings" -}}
{{- $slurm := .Values.slurm -}}
{{- $section := deepCopy (default dict (default dict .Values.config).slurm) -}}
{{- if not $section.cluster -}}
{{- fail "slurm.enabled needs config.slurm.cluster: the Slurm cluster SUP provisions, as registered in slurmdbd (docs/slurm.md)" -}}
{{- end -}}
{{- if not $slurm.slurmConf.configMap -}}
{{- fail "slurm.enabled needs slurm.slurmConf.configMap: a ConfigMap of yours holding the cluster's slurm.conf (key slurm.slurmConf.key), mounted read-only at /etc/slurm (docs/slurm.md)" -}}
{{- end -}}
{{- if not $slurm.mungeKey.secret -}}
{{- fail "slurm.enabled needs slurm.mungeKey.secret: a Secret of yours holding the cluster's munge key (key slurm.mungeKey.key), mounted into the munge sidecar only (docs/slurm.md)" -}}
{{- end -}}
{{- if le (int (default 0 $slurm.mungeUid)) 0 -}}
{{- fail (printf "slurm.mungeUid %v: munged runs as a non-root uid (a number above 0)" $slurm.mungeUid) -}}
{{- end -}}
{{- if not (default dict .Values.podSecurityContext).fsGroup -}}
{{- fail "slurm.enabled needs podSecurityContext.fsGroup (default 10001): the munge key Secret's file is root's, and munged in the sidecar reads it through that group" -}}
{{- end -}}
{{- $lockDir := $section.lock_dir | default "/run/lock/sup" -}}
{{- if or (not (isAbs $lockDir)) (ne (clean $lockDir) $lockDir) (eq $lockDir "/") -}}
{{- fail (printf "config.slurm.lock_dir %q: use an absolute, clean path (the chart mounts an emptyDir there)" $lockDir) -}}
{{- end -}}
{{- range $taken := list "/etc/sup" "/etc/slurm" "/run/munge" "/tmp" -}}
{{- if or (eq $lockDir $taken) (hasPrefix (printf "%s/" $taken) $lockDir) (hasPrefix (printf "%s/" $lockDir) $taken) -}}
{{- fail (printf "config.slurm.lock_dir %q: not in or above %s (SUP's pod mounts something else there)" $lockDir $taken) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $section "lock_dir" $lockDir -}}
{{- toYaml $section -}}
{{- end -}}

{{/* The database URL, from its Secret: the server and the migration Job need it. */}}
{{- define "sup.databaseEnv" -}}
- name: SUP_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "secrets.databaseUrl.name is required (a Secret holding SUP_DATABASE_URL)" .Values.secrets.databaseUrl.name }}
      key: {{ .Values.secrets.databaseUrl.key }}
{{- end -}}

{{/* The targets' and sources' credentials, by reference only (the server). */}}
{{- define "sup.secretEnv" -}}
{{- with .Values.secrets.ldapBindPassword }}
{{- if .name }}
- name: SUP_LDAP__BIND_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ .name }}, key: {{ .key }}}
{{- end }}
{{- end }}
{{- with .Values.secrets.keycloakClientSecret }}
{{- if .name }}
- name: SUP_KEYCLOAK__CLIENT_SECRET
  valueFrom:
    secretKeyRef: {name: {{ .name }}, key: {{ .key }}}
{{- end }}
{{- end }}
{{- with .Values.secrets.auditWebhookToken }}
{{- if .name }}
- name: SUP_AUDIT_OUT__WEBHOOK__TOKEN
  valueFrom:
    secretKeyRef: {name: {{ .name }}, key: {{ .key }}}
{{- end }}
{{- end }}
{{- range $connection, $ref := .Values.secrets.scimOAuthClientSecrets }}
- name: SUP_SCIM__OAUTH__{{ upper $connection }}__CLIENT_SECRET
  valueFrom:
    secretKeyRef: {name: {{ $ref.name }}, key: {{ $ref.key }}}
{{- end }}
{{- end -}}

{{- define "sup.gatewayName" -}}
{{- printf "%s-gateway" (include "sup.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{/* The gateway's pods have a name label of their own: SUP's Deployment and Service select on
name and instance (an immutable selector), and must not take the gateway's pods for SUP's. */}}
{{- define "sup.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-gateway" (include "sup.name" .) }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sup.gatewayLabels" -}}
{{ include "sup.gatewaySelectorLabels" . }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: {{ include "sup.name" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The `gateway` settings section as the chart runs it: the values' settings, with sup_url (SUP's
in-cluster Service), host_key_secret and the files the Secrets are mounted as filled in. */}}
{{- define "sup.gatewaySettings" -}}
{{- $gateway := .Values.gateway -}}
{{- $section := deepCopy (default dict $gateway.settings) -}}
{{- $url := printf "http://%s.%s.svc:%v" (include "sup.fullname" .) .Release.Namespace .Values.service.port -}}
{{- $defaults := dict "sup_url" $url "host_key_secret" (required "gateway.hostKeySecret.name is required (a Secret holding the gateway's host key)" $gateway.hostKeySecret.name) "host_key_file" "/etc/sup/gateway/ssh_host_ed25519_key" "token_file" "/etc/sup/gateway-token/token" -}}
{{- if $gateway.supCaSecret.name -}}
{{- $_ := set $defaults "sup_ca_file" "/etc/sup/gateway-ca/ca.crt" -}}
{{- end -}}
{{- $section = merge $section $defaults -}}
{{- if and $gateway.supCaSecret.name (not (hasPrefix "https://" $section.sup_url)) -}}
{{- fail (printf "gateway.supCaSecret is set but gateway.settings.sup_url %q is not https://: point it at SUP's TLS endpoint (docs/ssh-gateway.md, \"TLS to SUP\")" $section.sup_url) -}}
{{- end -}}
{{- $keyDir := dir $section.host_key_file -}}
{{- $tokenDir := dir $section.token_file -}}
{{- if eq $keyDir $tokenDir -}}
{{- fail (printf "gateway.settings: host_key_file and token_file must be in different directories (each is a Secret mounted there), both are in %s" $keyDir) -}}
{{- end -}}
{{- range $taken := list "/etc/sup/config" "/tmp" -}}
{{- if or (eq $keyDir $taken) (eq $tokenDir $taken) -}}
{{- fail (printf "gateway.settings: host_key_file and token_file may not be in %s (the gateway pod mounts something else there)" $taken) -}}
{{- end -}}
{{- end -}}
{{- toYaml $section -}}
{{- end -}}

{{/* The gateway's own SUP_CONFIG: its section and `log` only. Not SUP's ConfigMap: with `ldap` or
`keycloak` there, the settings would want secrets the gateway has no business holding. */}}
{{- define "sup.gatewayConfig" -}}
{{- $config := dict "gateway" (include "sup.gatewaySettings" . | fromYaml) -}}
{{- with (default dict .Values.config).log -}}
{{- $_ := set $config "log" (deepCopy .) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The Service types SUP's ServiceAccount may create (templates/service-policy.yaml): ClusterIP,
and the type the site gave the login pods' Services (kube.settings.service_type). */}}
{{- define "sup.loginServiceTypes" -}}
{{- $type := (default dict .Values.kube.settings).service_type | default "ClusterIP" -}}
{{- if not (has $type (list "ClusterIP" "NodePort" "LoadBalancer")) -}}
{{- fail (printf "kube.settings.service_type %q: use ClusterIP, NodePort or LoadBalancer" $type) -}}
{{- end -}}
{{- toYaml (list "ClusterIP" $type | uniq) -}}
{{- end -}}

{{/* Whether the chart creates the target namespace (templates/namespace.yaml): not when told not
to, and never the release's own. */}}
{{- define "sup.createsNamespace" -}}
{{- if and .Values.kube.enabled .Values.kube.createNamespace (ne (include "sup.targetNamespace" .) .Release.Namespace) -}}
true
{{- end -}}
{{- end -}}

{{/* A target namespace the chart does not create must exist and enforce Pod Security at the level
the chart would set (restricted; baseline with group pods, where restricted is accepted too): SUP
may create StatefulSets there, and only that label keeps such a pod from running privileged or
mounting a node's path. An install or upgrade that finds it otherwise fails with what to run.
`lookup` needs the cluster: under `helm template` (no cluster) it finds nothing, not even
kube-system, and the check is skipped; `helm template --dry-run=server`, install and upgrade check. */}}
{{- define "sup.checkNamespaceLabels" -}}
{{- if and .Values.kube.enabled (not (include "sup.createsNamespace" .)) -}}
{{- if lookup "v1" "Namespace" "" "kube-system" -}}
{{- $name := include "sup.targetNamespace" . -}}
{{- $level := include "sup.podSecurity" . -}}
{{- $fix := printf "kubectl label --overwrite namespace %s pod-security.kubernetes.io/enforce=%s" $name $level -}}
{{- $namespace := lookup "v1" "Namespace" "" $name -}}
{{- if not $namespace -}}
{{- fail (printf "kube.namespace %q does not exist and kube.createNamespace is false: create it with Pod Security enforced (kubectl create namespace %s && %s), or let the chart create it (kube.createNamespace=true)" $name $name $fix) -}}
{{- end -}}
{{- $enforce := dig "metadata" "labels" "pod-security.kubernetes.io/enforce" "" $namespace -}}
{{- $accepted := ternary (list "restricted" "baseline") (list "restricted") (eq $level "baseline") -}}
{{- if eq $level "privileged" -}}{{- $accepted = list "restricted" "baseline" "privileged" -}}{{- end -}}
{{- if not (has $enforce $accepted) -}}
{{- fail (printf "namespace %q enforces Pod Security %q; SUP provisions there and needs %s: %s (the chart does not create it, so it does not label it)" $name (default "nothing" $enforce) (join " or " $accepted) $fix) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The home directory maker (docs/homes.md): on when kube.settings.home_mode is shared. */}}
{{- define "sup.homesEnabled" -}}
{{- if and .Values.kube.enabled (eq (dig "home_mode" "claim" (default dict .Values.kube.settings)) "shared") -}}
true
{{- end -}}
{{- end -}}

{{- define "sup.homesName" -}}
{{- printf "%s-homes" (include "sup.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{- define "sup.homesSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-homes" (include "sup.name" .) }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sup.homesLabels" -}}
{{ include "sup.homesSelectorLabels" . }}
app.kubernetes.io/component: homes
app.kubernetes.io/part-of: {{ include "sup.name" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The maker's own SUP_CONFIG: the `home_dirs` section (values `homes`) and the log format. */}}
{{- define "sup.homesConfig" -}}
{{- $kube := default dict .Values.kube.settings -}}
{{- $section := dict "namespace" (include "sup.targetNamespace" .) "mount" "/srv/homes" "home_root" (default "/home" $kube.home_root) "quota" .Values.homes.quota "size" .Values.homes.size -}}
{{- $section = merge $section (deepCopy (default dict .Values.homes.settings)) -}}
{{- $log := dig "log" (dict) (default dict .Values.config) -}}
{{- toYaml (dict "home_dirs" $section "log" $log) -}}
{{- end -}}

{{/* The `helm test` Pod's labels (templates/tests/test-sup.yaml): a name of its own, so that no
Service or NetworkPolicy of SUP's takes it for SUP's pods; the gateway's pods' policy admits it. */}}
{{- define "sup.testSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-test" (include "sup.name" .) }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
