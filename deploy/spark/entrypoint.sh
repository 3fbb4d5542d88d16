#!/bin/bash
# Entrypoint of the eos-bridge Spark image (Dockerfile.spark).
#
# Spark on Kubernetes (the Spark Operator's SparkApplication, or spark-submit --master k8s://)
# starts the driver pod with the arguments `driver <spark-submit options> <app> <app args>` and
# each executor pod with `executor`, its settings in SPARK_* variables, and relies on the
# image's entrypoint to turn them into processes. Anything else is run unchanged: `docker run
# IMAGE python -m spark_jobs.stream ...` works as before (the chart's CronJob sets `command`,
# which replaces this entrypoint altogether).
#
# Modelled on Apache Spark's entrypoint for its Kubernetes images
# (resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh, Apache License
# 2.0). Differences: no tini (the JVM is exec'd and is PID 1, so it gets the pod's SIGTERM), no
# edit of /etc/passwd (the image runs as a user that has an entry; it is read-only to it), no
# stdout/stderr tee to K8S_SPARK_LOG_PATH, and our Kafka/Delta jars (EOS_SPARK_JARS_DIR) are put
# on the driver's and the executors' class path.
#
# Exit status 2: a variable Spark on Kubernetes sets is missing, or no command was given.
set -euo pipefail

die() {
  echo "spark entrypoint: $*" >&2
  exit 2
}

# Exit 2 naming the first of these variables that is unset or empty.
require() {
  local name
  for name in "$@"; do
    [[ -n ${!name:-} ]] || die "$mode needs $name (Spark on Kubernetes sets it in the pod)"
  done
}

mode=${1:-}

case $mode in
  driver | executor) shift ;;
  "") die "no command given: expected driver, executor or a command to run" ;;
  # Anything else (python -m spark_jobs.stream ..., eos-bridge ...): exactly as given.
  *) exec "$@" ;;
esac

if ! getent passwd "$(id -u)" >/dev/null; then
  # Hadoop's login (UnixLoginModule) needs a user name; Spark's script would add a passwd entry.
  echo "spark entrypoint: warning: uid $(id -u) has no passwd entry; Spark may fail to log in" >&2
fi

# pyspark's pip distribution is a complete SPARK_HOME (bin/, jars/) inside site-packages.
if [[ -z ${SPARK_HOME:-} ]]; then
  SPARK_HOME=$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
fi
export SPARK_HOME

# spark-submit's launcher (driver) adds SPARK_DIST_CLASSPATH to the JVM's class path; the job's
# spark.jars alone would reach the executors only, since the driver's JVM is already running
# when the Python job configures its session.
if [[ -n ${EOS_SPARK_JARS_DIR:-} ]]; then
  export SPARK_DIST_CLASSPATH="${SPARK_DIST_CLASSPATH:+$SPARK_DIST_CLASSPATH:}$EOS_SPARK_JARS_DIR/*"
fi

if [[ $mode == driver ]]; then
  require SPARK_DRIVER_BIND_ADDRESS
  # The operator submitted in cluster mode; inside the driver pod the driver runs in client mode.
  exec "$SPARK_HOME/bin/spark-submit" \
    --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
    --deploy-mode client \
    "$@"
fi

require SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_EXECUTOR_MEMORY \
  SPARK_APPLICATION_ID SPARK_EXECUTOR_POD_IP SPARK_EXECUTOR_POD_NAME

# Spark passes the executor's JVM options as SPARK_JAVA_OPT_0, _1, ... in that order.
java_opts=()
for name in $(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n); do
  java_opts+=("${!name}")
done

# Configuration directories first (log4j2 properties, Hadoop's *-site.xml), as Spark's script.
classpath="$SPARK_HOME/jars/*"
[[ -z ${SPARK_EXTRA_CLASSPATH:-} ]] || classpath+=":$SPARK_EXTRA_CLASSPATH"
[[ -z ${SPARK_DIST_CLASSPATH:-} ]] || classpath+=":$SPARK_DIST_CLASSPATH"
[[ -z ${HADOOP_CONF_DIR:-} ]] || classpath="$HADOOP_CONF_DIR:$classpath"
classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$classpath"

exec "${JAVA_HOME:+$JAVA_HOME/bin/}java" \
  "${java_opts[@]}" \
  "-Xms$SPARK_EXECUTOR_MEMORY" \
  "-Xmx$SPARK_EXECUTOR_MEMORY" \
  -cp "$classpath" \
  org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
  --driver-url "$SPARK_DRIVER_URL" \
  --executor-id "$SPARK_EXECUTOR_ID" \
  --cores "$SPARK_EXECUTOR_CORES" \
  --app-id "$SPARK_APPLICATION_ID" \
  --hostname "$SPARK_EXECUTOR_POD_IP" \
  --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
  --podName "$SPARK_EXECUTOR_POD_NAME"
