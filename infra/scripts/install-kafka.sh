#!/usr/bin/env bash
# Resolves the Apache Kafka broker + console tool jars (version in infra/versions.env) from Maven Central
# into .local/kafka/libs. Skipped when the stamp for this version and pom already exists.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ensure_local_dirs

libs="$LOCAL_DIR/kafka/libs"
pom="$INFRA_DIR/kafka/pom.xml"
pom_hash="$(sha256sum "$pom" | cut -c1-12)"
stamp="$libs/.resolved-$KAFKA_VERSION-$pom_hash"
if [[ -f "$stamp" ]]; then
  log "kafka $KAFKA_VERSION jars already resolved ($libs)"
  exit 0
fi
command -v mvn >/dev/null || die "mvn is not installed (needed to resolve the Kafka jars)"
command -v java >/dev/null || die "java is not installed (needed to run Kafka)"

log "resolving kafka $KAFKA_VERSION jars from Maven Central (first time: ~45 MB into ~/.m2)"
rm -rf "$libs.tmp"
mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
  -Dkafka.version="$KAFKA_VERSION" -Dscala.binary.version="$KAFKA_SCALA_VERSION" \
  -Dlog4j.version="$LOG4J_VERSION" -DincludeScope=runtime -DoutputDirectory="$libs.tmp"
rm -rf "$libs"
mv "$libs.tmp" "$libs"
touch "$stamp"
log "kafka jars ready: $(find "$libs" -name '*.jar' | wc -l) jars in $libs"
