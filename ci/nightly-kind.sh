#!/usr/bin/env bash
# The nightly conformance run on kind (.github/workflows/nightly-kind.yaml and `make nightly` run
# this; so can you, as root on a Debian machine: the harness installs and starts Docker itself):
#
#   1. builds kind, kubeadm, kubectl and kube-proxy with the harness's other binaries
#      (`kthena-conformance binaries build --kind`) and puts them first on PATH;
#   2. creates the kind cluster with the harness (`kthena-conformance cluster up --provider kind`:
#      its own Docker engine if none answers, the node image built locally, a control plane and a
#      plain, a GPU and an NPU worker, Pod networking and CoreDNS, every node Ready);
#   3. builds the reference controller's and the fake DRA drivers' images from this checkout (no
#      registry: `kthena-conformance cluster images`) and loads them into the nodes;
#   5. makes a throwaway CA and a serving certificate for the webhook Service (openssl), stores
#      them as the Secret the Deployment mounts, and applies what `kthena-ref manifests` prints
#      (ModelServing and AutoscalingPolicy CRDs, ClusterRole, PodGroup CRD; then the controller
#      with --image and --ca-bundle-file);
#   6. waits for the Deployment to be Available and for the webhook to reject an invalid spec;
#   7. runs the suite against it as an external implementation with ci/kthena-ref-support.yaml,
#      with the controller's log streamed to a file the suite takes evidence from;
#   8. on exit, always (once this run has created the cluster; it never adopts an existing one):
#      controller logs, events and the applied manifests into $REPORT_DIR/cluster/,
#      `kind export logs` into $REPORT_DIR/cluster/kind-logs/, `kthena-conformance cluster down`
#      (which also stops the harness's Docker engine and restores the host), and the wall time.
#
# With SHARD=I/N the suite runs only its I-th of N shards (`run --shard I/N`): the workflow runs
# N such jobs side by side, then one job merges their reports with --merge.
#
# The exit code is the suite's (or the failing setup step's).
#
#   ci/nightly-kind.sh              run it
#   ci/nightly-kind.sh --dry-run    print every command, in order, and run none (creates nothing)
#   ci/nightly-kind.sh --webhook-certs DIR
#                                   only make the webhook CA and serving certificate in DIR
#   ci/nightly-kind.sh --merge DIR  no cluster: merge the shard reports DIR/*/conformance-report.json
#                                   (one directory per shard job's artifact) into $REPORT_DIR with
#                                   `kthena-conformance report merge`, then `report verify` it; the
#                                   exit code is the merged run's (2: the reports were refused), or
#                                   verify's if the run passed but its report does not verify
#
# Environment:
#   KIND_CLUSTER_NAME       kind cluster name (default kthena)
#   REPORT_DIR              where the suite's reports and the cluster diagnostics go (default reports)
#   IMAGE                   controller image (default kthena-ref:ci); needs a tag other than latest,
#                           as the Deployment sets no imagePullPolicy
#   KEEP_CLUSTER            1 keeps the cluster and its kubeconfig afterwards (local debugging)
#   WORK_DIR                private directory for the kubeconfig and keys (default: a new mktemp -d;
#                           never inside REPORT_DIR, which is uploaded)
#   SHARD                   I/N: run only shard I of N of the suite (default: the whole suite)

set -euo pipefail

usage() {
    sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

DRY_RUN=0
CERTS_ONLY=""
MERGE_DIR=""
while (($#)); do
    case "$1" in
        --dry-run) DRY_RUN=1 ;;
        --webhook-certs)
            [[ $# -ge 2 ]] || { echo "error: --webhook-certs needs a directory" >&2; exit 2; }
            CERTS_ONLY=$2
            shift
            ;;
        --merge)
            [[ $# -ge 2 ]] || { echo "error: --merge needs the directory of the shard reports" >&2; exit 2; }
            MERGE_DIR=$2
            shift
            ;;
        -h | --help) usage; exit 0 ;;
        *) echo "error: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

absolute() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }

# Paths given by the caller are relative to where they called from; everything else to the repo.
REPORT_DIR=$(absolute "${REPORT_DIR:-reports}")
[[ -z "$CERTS_ONLY" ]] || CERTS_ONLY=$(absolute "$CERTS_ONLY")
[[ -z "$MERGE_DIR" ]] || MERGE_DIR=$(absolute "$MERGE_DIR")
[[ -z "${WORK_DIR:-}" ]] || WORK_DIR=$(absolute "$WORK_DIR")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# The project's virtualenv first when one exists and none is active (local runs); CI installs the
# package into setup-python's interpreter, whose scripts are already on PATH.
if [[ -z "${VIRTUAL_ENV:-}" && -x "$ROOT/.venv/bin/kthena-conformance" ]]; then
    PATH="$ROOT/.venv/bin:$PATH"
fi

CLUSTER_NAME=${KIND_CLUSTER_NAME:-kthena}
CONTEXT="kind-$CLUSTER_NAME"
IMAGE=${IMAGE:-kthena-ref:ci}
SUPPORT_FILE=ci/kthena-ref-support.yaml
# The layout of kind-configs/kthena.yaml: a plain, a GPU and an NPU worker.
CLUSTER_SHAPE=(--nodes 1 --gpu-nodes 1 --npu-nodes 1)
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
SHARD=${SHARD:-}
DIAG_DIR="$REPORT_DIR/cluster"

# Names fixed by kthena_ref/deploy/controller.yaml.
NAMESPACE=kthena-system
DEPLOYMENT=kthena-ref-controller
SELECTOR=app.kubernetes.io/name=kthena-ref-controller
WEBHOOK_SERVICE=kthena-ref-webhook
WEBHOOK_SECRET=kthena-ref-webhook-tls
WEBHOOK_CONFIG=kthena-ref-validating
CRDS=(crd/modelservings.workload.serving.volcano.sh crd/autoscalingpolicies.workload.serving.volcano.sh crd/modelboosters.workload.serving.volcano.sh crd/podgroups.scheduling.volcano.sh)

CLUSTER_CREATED=0
SUITE_RC=0
BG_PID=""

log() { printf '[nightly-kind %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The words of a command as a shell would read them back (quoted only where needed).
quote() {
    local word out=""
    for word in "$@"; do
        if [[ "$word" =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
            out+=" $word"
        else
            out+=" $(printf '%q' "$word")"
        fi
    done
    printf '%s' "${out# }"
}

# run CMD...: print it (always), run it (unless --dry-run).
run() {
    if ((DRY_RUN)); then
        printf '+ %s\n' "$(quote "$@")"
        return 0
    fi
    printf '+ %s\n' "$(quote "$@")" >&2
    "$@"
}

# run_to FILE CMD...: like run, with CMD's standard output written to FILE.
run_to() {
    local file=$1
    shift
    if ((DRY_RUN)); then
        printf '+ %s > %s\n' "$(quote "$@")" "$(quote "$file")"
        return 0
    fi
    printf '+ %s > %s\n' "$(quote "$@")" "$(quote "$file")" >&2
    "$@" >"$file"
}

# run_bg FILE CMD...: like run_to, in the background; its process id goes to BG_PID.
run_bg() {
    local file=$1
    shift
    if ((DRY_RUN)); then
        printf '+ %s > %s &\n' "$(quote "$@")" "$(quote "$file")"
        return 0
    fi
    printf '+ %s > %s &\n' "$(quote "$@")" "$(quote "$file")" >&2
    "$@" >"$file" 2>&1 &
    BG_PID=$!
}

# write FILE: standard input into FILE.
write() {
    if ((DRY_RUN)); then
        cat >/dev/null
        printf '+ write %s\n' "$(quote "$1")"
        return 0
    fi
    cat >"$1"
}

kc() { run kubectl --kubeconfig "$KUBECONFIG_PATH" --context "$CONTEXT" "$@"; }
kc_to() {
    local file=$1
    shift
    run_to "$file" kubectl --kubeconfig "$KUBECONFIG_PATH" --context "$CONTEXT" "$@"
}

# A throwaway CA and a serving certificate for the webhook Service's DNS names, valid two days.
webhook_certificates() {
    local dir=$1 svc="$WEBHOOK_SERVICE.$NAMESPACE.svc"
    run mkdir -p "$dir"
    write "$dir/serving.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:$svc, DNS:$svc.cluster.local, DNS:$WEBHOOK_SERVICE.$NAMESPACE, DNS:$WEBHOOK_SERVICE
EOF
    run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 2 \
        -subj "/CN=kthena-ref-webhook-ca" -keyout "$dir/ca.key" -out "$dir/ca.crt"
    run openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
        -subj "/CN=$svc" -keyout "$dir/tls.key" -out "$dir/tls.csr"
    run openssl x509 -req -sha256 -days 2 -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -set_serial "0x$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" -extfile "$dir/serving.ext" \
        -out "$dir/tls.crt"
}

# The Deployment sets no imagePullPolicy: a :latest or untagged image would be pulled from a
# registry (policy Always) instead of the copy `kind load` put on the nodes.
check_image() {
    local name=${IMAGE##*/}
    [[ "$name" == *:* && "$name" != *:latest ]] || die "IMAGE=$IMAGE needs a tag other than latest"
}

require_tools() {
    local tool
    for tool in openssl python3 kthena-ref kthena-conformance; do
        command -v "$tool" >/dev/null || die "\`$tool\` is not on PATH (kthena-*: \`pip install -e .[dev]\`; otherwise install it)"
    done
}

# kind, kubectl (and what the node image carries) from the harness's binary cache, first on PATH.
harness_tools() {
    local bin_dir
    if ((DRY_RUN)); then
        run kthena-conformance binaries build --kind
        return 0
    fi
    printf '+ %s\n' "kthena-conformance binaries build --kind" >&2
    bin_dir=$(kthena-conformance binaries build --kind) || die "the harness could not build kind and kubectl"
    PATH="$bin_dir:$PATH"
}

# DOCKER_HOST of the engine the harness's kind cluster runs on (its own dockerd, or the one found).
docker_host() {
    local host
    ((DRY_RUN)) && return 0
    host=$(kthena-conformance cluster status --provider kind --name "$CLUSTER_NAME" -o json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["dockerHost"])') ||
        die "the kind cluster '$CLUSTER_NAME' does not answer"
    export DOCKER_HOST=$host
}

# Wait until the API server's call to the webhook rejects a spec that only the webhook rejects
# (workerReplicas without workerTemplate; the CRD schema accepts it). Server-side dry-run: nothing
# is stored.
wait_for_webhook() {
    local probe="$WORK_DIR/admission-probe.yaml" out="" _
    write "$probe" <<'EOF'
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata: {name: admission-probe, namespace: default}
spec:
  template:
    roles:
    - name: r
      workerReplicas: 1
      entryTemplate: {spec: {containers: [{name: c, image: i}]}}
EOF
    if ((DRY_RUN)); then
        kc create --dry-run=server -f "$probe"
        return 0
    fi
    log "until the webhook denies it: kubectl create --dry-run=server -f $probe"
    for _ in $(seq 60); do
        if out=$(kubectl --kubeconfig "$KUBECONFIG_PATH" --context "$CONTEXT" create --dry-run=server -f "$probe" 2>&1); then
            die "an invalid ModelServing was accepted: no validating webhook answers"
        fi
        if [[ "$out" == *"denied the request"* ]]; then
            log "the webhook answers"
            return 0
        fi
        sleep 2
    done
    die "the webhook did not answer within 120s; last answer: $out"
}

collect() {
    run mkdir -p "$DIAG_DIR"
    if ((DRY_RUN)) || [[ -d "$WORK_DIR/deploy" ]]; then
        run cp -R "$WORK_DIR/deploy" "$DIAG_DIR/deploy" || log "could not copy the applied manifests"
    fi
    kc_to "$DIAG_DIR/controller.log" logs -n "$NAMESPACE" -l "$SELECTOR" --all-containers --prefix --timestamps \
        --tail=-1 || log "could not read the controller logs"
    kc_to "$DIAG_DIR/controller-previous.log" logs -n "$NAMESPACE" -l "$SELECTOR" --all-containers --prefix \
        --timestamps --tail=-1 --previous || log "no previous controller containers"
    kc_to "$DIAG_DIR/kthena-system.yaml" get deployment,replicaset,pod,service,endpointslice,lease -n "$NAMESPACE" \
        -o yaml || log "could not read $NAMESPACE"
    kc_to "$DIAG_DIR/webhook-configuration.yaml" get validatingwebhookconfiguration "$WEBHOOK_CONFIG" -o yaml ||
        log "could not read the webhook configuration"
    kc_to "$DIAG_DIR/pods.txt" get pods -A -o wide || log "could not list pods"
    kc_to "$DIAG_DIR/events.txt" get events -A --sort-by=.lastTimestamp || log "could not list events"
    run kind export logs "$DIAG_DIR/kind-logs" --name "$CLUSTER_NAME" || log "kind export logs failed"
}

cleanup() {
    local rc=$?
    trap - EXIT
    set +e
    if [[ -n "$BG_PID" ]]; then
        kill "$BG_PID" 2>/dev/null
        wait "$BG_PID" 2>/dev/null
    fi
    if ((CLUSTER_CREATED)); then
        log "collecting diagnostics into $DIAG_DIR"
        collect
        if [[ "$KEEP_CLUSTER" == 1 ]]; then
            log "KEEP_CLUSTER=1: kind cluster '$CLUSTER_NAME' kept; kubeconfig $KUBECONFIG_PATH"
        else
            run kthena-conformance cluster down --provider kind --name "$CLUSTER_NAME"
        fi
    fi
    if ((!DRY_RUN)) && [[ "$KEEP_CLUSTER" != 1 && -n "${WORK_DIR:-}" ]]; then
        rm -rf "$WORK_DIR"
    fi
    log "exit code $rc after ${SECONDS}s"
    exit "$rc"
}

# The shard jobs' reports (DIR/<artifact>/conformance-report.json) merged into $REPORT_DIR, verified.
merge_shards() {
    local dir=$1 rc=0 verify_rc=0
    local -a reports
    shopt -s nullglob
    reports=("$dir"/*/conformance-report.json)
    shopt -u nullglob
    if ((${#reports[@]} == 0)); then
        log "error: no shard reports (*/conformance-report.json) under $dir: did every shard job fail before its suite?"
        exit 2
    fi
    log "merging ${#reports[@]} shard report(s) into $REPORT_DIR"
    run mkdir -p "$REPORT_DIR"
    set +e
    run kthena-conformance report merge "${reports[@]}" --output "$REPORT_DIR"
    rc=$?
    if ((rc != 2)); then # 2: refused (each reason printed), nothing written to verify
        run kthena-conformance report verify "$REPORT_DIR/conformance-report.json"
        verify_rc=$?
    fi
    set -e
    if ((rc == 0 && verify_rc != 0)); then
        rc=$verify_rc
    fi
    log "merge exit code $rc (verify: $verify_rc)"
    exit "$rc"
}

main() {
    if [[ -n "$CERTS_ONLY" ]]; then
        webhook_certificates "$CERTS_ONLY"
        return 0
    fi
    if [[ -n "$MERGE_DIR" ]]; then
        merge_shards "$MERGE_DIR"
    fi
    if [[ -n "$SHARD" && ! "$SHARD" =~ ^[0-9]+/[0-9]+$ ]]; then
        die "SHARD=$SHARD: expected I/N (for example 1/2)"
    fi
    check_image
    ((DRY_RUN)) || require_tools
    harness_tools
    if ((DRY_RUN)); then
        WORK_DIR=${WORK_DIR:-${TMPDIR:-/tmp}/kthena-nightly-kind.DRY-RUN}
    else
        WORK_DIR=${WORK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kthena-nightly-kind.XXXXXX")}
    fi
    KUBECONFIG_PATH="$WORK_DIR/kubeconfig"
    trap cleanup EXIT
    log "cluster '$CLUSTER_NAME', controller image $IMAGE, reports in $REPORT_DIR"
    run mkdir -p "$REPORT_DIR" "$WORK_DIR/deploy"

    # Never adopt (and later delete) a cluster this run did not create.
    if ((DRY_RUN)); then
        run kthena-conformance cluster status --provider kind --name "$CLUSTER_NAME"
    elif kthena-conformance cluster status --provider kind --name "$CLUSTER_NAME" >/dev/null 2>&1; then
        die "a kind cluster named '$CLUSTER_NAME' exists already: delete it or set KIND_CLUSTER_NAME"
    fi
    CLUSTER_CREATED=1
    run_to "$WORK_DIR/kubeconfig-path" kthena-conformance cluster up --provider kind --name "$CLUSTER_NAME" \
        "${CLUSTER_SHAPE[@]}"
    ((DRY_RUN)) || cp "$(tail -n 1 "$WORK_DIR/kubeconfig-path")" "$KUBECONFIG_PATH"
    docker_host
    kc wait --for=condition=Ready nodes --all --timeout=300s
    log "building the controller image $IMAGE and the fake DRA drivers' image from this checkout"
    run kthena-conformance cluster images --name "$CLUSTER_NAME" --image "$IMAGE"

    log "deploying the reference controller"
    webhook_certificates "$WORK_DIR/webhook"
    run_to "$WORK_DIR/deploy/crds-and-rbac.yaml" kthena-ref manifests crd autoscaling-crd modelbooster-crd rbac podgroup-crd
    run_to "$WORK_DIR/deploy/controller.yaml" kthena-ref manifests controller --image "$IMAGE" \
        --ca-bundle-file "$WORK_DIR/webhook/ca.crt"
    # Server-side apply: the CRD embeds the PodSpec schema, too big for a client-side
    # last-applied-configuration annotation to be comfortable.
    kc apply --server-side --force-conflicts -f "$WORK_DIR/deploy/crds-and-rbac.yaml"
    kc wait --for=condition=Established "${CRDS[@]}" --timeout=60s
    kc create namespace "$NAMESPACE"
    kc create secret tls "$WEBHOOK_SECRET" -n "$NAMESPACE" --cert "$WORK_DIR/webhook/tls.crt" \
        --key "$WORK_DIR/webhook/tls.key"
    kc apply --server-side --force-conflicts -f "$WORK_DIR/deploy/controller.yaml"
    kc rollout status "deployment/$DEPLOYMENT" -n "$NAMESPACE" --timeout=300s
    kc wait --for=condition=Available "deployment/$DEPLOYMENT" -n "$NAMESPACE" --timeout=60s
    wait_for_webhook

    # The controller's log while the suite runs: the suite files the lines naming a failed test's
    # namespace with that test's evidence. (A restarted container's stream ends; the full logs,
    # --previous included, are collected on exit.)
    run mkdir -p "$DIAG_DIR"
    run_bg "$DIAG_DIR/controller-during-suite.log" kubectl --kubeconfig "$KUBECONFIG_PATH" --context "$CONTEXT" \
        logs -f -n "$NAMESPACE" -l "$SELECTOR" --all-containers --prefix --timestamps --tail=-1

    log "running the suite against kthena-ref as an external implementation"
    set +e
    local -a shard_args=()
    if [[ -n "$SHARD" ]]; then
        shard_args=(--shard "$SHARD")
        log "shard $SHARD of the suite"
    fi
    run kthena-conformance run --provider existing --kubeconfig "$KUBECONFIG_PATH" --context "$CONTEXT" \
        --implementation external --support-file "$SUPPORT_FILE" --report-dir "$REPORT_DIR" \
        --controller-log "$DIAG_DIR/controller-during-suite.log" "${shard_args[@]}"
    SUITE_RC=$?
    set -e
    log "the suite exited with $SUITE_RC"
    exit "$SUITE_RC"
}

main
