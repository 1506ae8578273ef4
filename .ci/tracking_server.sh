# shellcheck shell=bash
# A real MLflow tracking server for the tracking tests (tests/integration/test_tracking_server.py,
# docs/tracking.md): PostgreSQL (Debian's postgresql package, installed when missing and allowed)
# and `mlflow server` on it, both on 127.0.0.1 at free ports, their data in a temporary folder.
# Sourced by .ci/run:
#   start_tracking_server   exports MLREPRO_TEST_MLFLOW_URI (the server) and
#                           MLREPRO_TEST_MLFLOW_BACKEND (its PostgreSQL database)
#   stop_tracking_server    stops both and removes the folder (also from a trap)
# Returns non-zero, saying why, when PostgreSQL or MLflow is not there: the caller decides.

tracking_dir=""
tracking_pid=""
tracking_pg=""
tracking_as=()

_free_port() {
    python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

_pg_bin() {
    local found
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -z "$found" ] && command -v initdb >/dev/null 2>&1; then
        found=$(dirname "$(command -v initdb)")
    fi
    echo "$found"
}

start_tracking_server() {
    local bin pg_port port i
    bin=$(_pg_bin)
    if [ -z "$bin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql) \
            >/dev/null || true
        bin=$(_pg_bin)
    fi
    if [ -z "$bin" ]; then
        echo "tracking server: no PostgreSQL (apt-get install postgresql)" >&2
        return 1
    fi
    if ! python -c 'import mlflow.server, psycopg2' 2>/dev/null; then
        echo "tracking server: MLflow or psycopg2 missing (pip install '.[track-server]')" >&2
        return 1
    fi
    tracking_dir=$(mktemp -d "${TMPDIR:-/tmp}/mlrepro-tracking.XXXXXX")
    chmod 755 "$tracking_dir"
    # PostgreSQL refuses to run as root: as its own user, where there is one.
    tracking_as=()
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
        tracking_as=(runuser -u postgres --)
    fi
    tracking_pg="$tracking_dir/pg"
    mkdir "$tracking_pg"
    [ "$(id -u)" = 0 ] && chown postgres "$tracking_pg"
    pg_port=$(_free_port)
    "${tracking_as[@]}" "$bin/initdb" -D "$tracking_pg/data" -U mlflow --auth=trust \
        >"$tracking_dir/initdb.log" 2>&1 || { cat "$tracking_dir/initdb.log"; return 1; }
    "${tracking_as[@]}" "$bin/pg_ctl" -D "$tracking_pg/data" -l "$tracking_pg/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $tracking_pg -c fsync=off" start \
        >/dev/null || { cat "$tracking_pg/server.log"; return 1; }
    "${tracking_as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U mlflow mlflow
    export MLREPRO_TEST_MLFLOW_BACKEND="postgresql+psycopg2://mlflow@127.0.0.1:$pg_port/mlflow"
    port=$(_free_port)
    # No job runner (its task queues start a dozen processes the tracking API does not need).
    MLFLOW_DISABLE_TELEMETRY=true MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false \
        mlflow server --host 127.0.0.1 --port "$port" --workers 2 \
        --backend-store-uri "$MLREPRO_TEST_MLFLOW_BACKEND" \
        --artifacts-destination "$tracking_dir/artifacts" \
        >"$tracking_dir/mlflow.log" 2>&1 &
    tracking_pid=$!
    for i in $(seq 180); do
        if python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" \
            2>/dev/null; then
            export MLREPRO_TEST_MLFLOW_URI="http://127.0.0.1:$port"
            echo "tracking server: $MLREPRO_TEST_MLFLOW_URI on $MLREPRO_TEST_MLFLOW_BACKEND (${i}s)"
            return 0
        fi
        if ! kill -0 "$tracking_pid" 2>/dev/null; then
            break
        fi
        sleep 1
    done
    echo "tracking server: mlflow server did not start" >&2
    tail -n 30 "$tracking_dir/mlflow.log" >&2
    return 1
}

stop_tracking_server() {
    if [ -n "$tracking_pid" ]; then
        # The server's own process group: gunicorn/uvicorn workers with it.
        kill "$tracking_pid" 2>/dev/null || true
        wait "$tracking_pid" 2>/dev/null || true
        tracking_pid=""
    fi
    if [ -n "$tracking_pg" ] && [ -d "$tracking_pg/data" ]; then
        "${tracking_as[@]}" "$(_pg_bin)/pg_ctl" -D "$tracking_pg/data" -m fast -w stop \
            >/dev/null 2>&1 || true
    fi
    if [ -n "$tracking_dir" ]; then
        rm -rf "$tracking_dir"
        tracking_dir=""
    fi
    unset MLREPRO_TEST_MLFLOW_URI MLREPRO_TEST_MLFLOW_BACKEND
}
